/**
 * The recipient of a signed raw transaction (`eth_sendRawTransaction`), decoded with ethers' transaction
 * parser (every type: legacy, 2930, 1559, 4844, 7702). ethers is loaded on first need, not with the
 * gateway: its 100 ms of loading and its memory are paid only by a gateway whose endpoints fence
 * contracts (compileFences starts the load when one does, so the first raw transaction rarely waits).
 */

type Decode = (raw: string) => { to: string | null };

let decode: Decode | undefined;
let loading: Promise<Decode> | undefined;

/** Starts loading the decoder (once); resolves when it is ready. */
export function loadRawTransactionDecoder(): Promise<Decode> {
  loading ??= import('ethers/transaction').then((m) => {
    decode = (raw) => m.Transaction.from(raw);
    return decode;
  });
  return loading;
}

/**
 * The lower-case `to` of a raw transaction, null when it deploys a contract, an Error when the bytes are
 * not a transaction; a promise of the same while the decoder loads.
 */
export function rawTransactionTarget(raw: unknown): string | null | Error | Promise<string | null | Error> {
  if (typeof raw !== 'string' || !/^0x[0-9a-fA-F]+$/.test(raw))
    return new Error('params[0] must be the signed transaction as 0x-prefixed hex');
  // Fail closed: without its decoder, a raw transaction's recipient is unknown, so it is refused.
  if (decode === undefined)
    return loadRawTransactionDecoder().then(
      (d) => targetOf(d, raw),
      () => new Error('the transaction decoder could not be loaded'),
    );
  return targetOf(decode, raw);
}

function targetOf(d: Decode, raw: string): string | null | Error {
  try {
    const to = d(raw).to;
    return to === null ? null : to.toLowerCase();
  } catch (e) {
    return new Error((e as { shortMessage?: string }).shortMessage ?? 'not a transaction');
  }
}
