import type pg from 'pg';

/**
 * Runs `work` in one transaction on a connection of `pool`: COMMIT when it resolves, ROLLBACK when it
 * throws (the error is thrown on). A connection whose ROLLBACK failed too (the server gone, the socket
 * cut) is destroyed rather than handed back to the pool. When COMMIT itself fails the outcome is unknown
 * to the caller: what it writes must be safe to write again (see usage_batches).
 */
export async function inPgTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken = false;
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {
      broken = true;
    });
    throw err;
  } finally {
    client.release(broken);
  }
}
