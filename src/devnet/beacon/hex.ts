/** Bytes as the Beacon API writes them (lowercase 0x hex) and back; the node keeps roots as hex strings. */
export const toHex = (bytes: Uint8Array): string => '0x' + Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');

/** The bytes of 0x hex (any case); the caller has checked its shape. */
export const fromHex = (hex: string): Uint8Array => Uint8Array.from(Buffer.from(hex.slice(2), 'hex'));
