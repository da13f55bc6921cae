import type pg from 'pg';

/**
 * Runs `work` in one transaction on a connection of `pool`: COMMIT when it resolves, ROLLBACK when it
 * throws (the error is thrown on). A connection that broke meanwhile, or whose ROLLBACK failed too (the
 * server gone, the socket cut), is destroyed rather than handed back to the pool. When COMMIT itself fails
 * the outcome is unknown to the caller: what it writes must be safe to write again (see usage_batches).
 */
export async function inPgTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  // While checked out a client has no listener of the pool's: a connection lost now (the server
  // restarting) would be an uncaught 'error' event. The query under way rejects with it anyway.
  let broken = false;
  const onError = (): void => {
    broken = true;
  };
  client.on('error', onError);
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
    client.removeListener('error', onError);
    client.release(broken);
  }
}
