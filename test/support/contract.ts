/**
 * A tiny hand-assembled contract for the client tests (no solc in this environment). Every call to
 * it emits one LOG1 whose data is the calldata and whose only topic is ECHO_TOPIC, and returns the
 * 32-byte CALL_RESULT. So a transaction to it produces a log a filter can see, and eth_call has a
 * known answer.
 */
import { keccak256, stringToHex } from 'viem';

/** The event's topic: the hash of a name of our own, so no other log on the chain can match it. */
export const ECHO_TOPIC = keccak256(stringToHex('chaingate.Echo(calldata)'));

/** What every call returns: 32 bytes, distinctive enough that a stray answer cannot equal it. */
export const CALL_RESULT = '0x00000000000000000000000000000000000000000000000000000000c0ffee42';

const strip = (hex: string): string => hex.slice(2);

/** The code left at the contract's address. */
export const RUNTIME_BYTECODE = `0x${[
  // mem[0 .. calldatasize) = calldata
  '36', //             CALLDATASIZE             size
  '6000', //           PUSH1 0                  offset in calldata
  '6000', //           PUSH1 0                  offset in memory
  '37', //             CALLDATACOPY
  // LOG1(offset 0, size calldatasize, topic ECHO_TOPIC): LOG1 pops offset, size, topic0 in that order
  `7f${strip(ECHO_TOPIC)}`, // PUSH32 topic
  '36', //             CALLDATASIZE             size
  '6000', //           PUSH1 0                  offset
  'a1', //             LOG1
  // mem[0 .. 32) = CALL_RESULT; RETURN(0, 32)
  `7f${strip(CALL_RESULT)}`, // PUSH32 result
  '6000', //           PUSH1 0
  '52', //             MSTORE
  '6020', //           PUSH1 32                 size
  '6000', //           PUSH1 0                  offset
  'f3', //             RETURN
].join('')}` as const;

const RUNTIME_LENGTH = strip(RUNTIME_BYTECODE).length / 2;
/** The constructor below is 11 bytes long, so the runtime starts right after it at offset 0x0b. */
const CONSTRUCTOR_LENGTH = 11;
const byte = (n: number): string => n.toString(16).padStart(2, '0');

/** The creation code: a constructor that copies the runtime into memory and returns it. */
export const DEPLOY_BYTECODE = `0x${[
  `60${byte(RUNTIME_LENGTH)}`, //        PUSH1 runtime length
  '80', //                               DUP1                 (kept for RETURN)
  `60${byte(CONSTRUCTOR_LENGTH)}`, //    PUSH1 runtime offset in this code
  '6000', //                             PUSH1 0              memory destination
  '39', //                               CODECOPY             pops dest, offset, size
  '6000', //                             PUSH1 0
  'f3', //                               RETURN               pops offset 0, size (the DUP1 copy)
].join('')}${strip(RUNTIME_BYTECODE)}` as const;

if (strip(DEPLOY_BYTECODE).length / 2 !== CONSTRUCTOR_LENGTH + RUNTIME_LENGTH || RUNTIME_LENGTH > 0xff) {
  // The offsets above are hand-counted; fail loudly at import rather than deploy a broken contract.
  throw new Error('contract.ts: constructor length or runtime length miscounted');
}
