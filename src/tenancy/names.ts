/** The longest owner or endpoint name, in Unicode code points (not UTF-16 units: an emoji counts once). */
export const MAX_NAME_LENGTH = 100;

/**
 * One character a name may not hold and an operator's terminal must never receive raw: controls (Cc:
 * newline, ESC, DEL, C1), format characters (Cf: bidi overrides, zero-width spaces, BOM), line and
 * paragraph separators (Zl, Zp), and lone surrogates (Cs, which have no UTF-8 form: SQLite would store
 * invalid bytes). ZWNJ and ZWJ (U+200C, U+200D) are Cf but allowed: they join letters in several
 * scripts and emoji sequences, and move neither the cursor nor the text around them.
 * Not global, so `test` keeps no state; the CLI's tables build their escaping from its source.
 */
export const UNPRINTABLE = /(?![\u200c\u200d])[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/u;

/** `U+000A`: how a message names one character. */
export function codePointLabel(c: string): string {
  return `U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
}

/**
 * What is wrong with `name` as an owner or endpoint name, worded to follow the field's name
 * (`'name' must be ...`, `--name must be ...`), or null when it is valid: 1 to MAX_NAME_LENGTH code
 * points, none of them UNPRINTABLE. Names are stored as given; the CLI trims its --name first.
 */
export function nameProblem(name: string): string | null {
  let length = 0;
  for (const _ of name) length++;
  if (length < 1 || length > MAX_NAME_LENGTH) return `must be 1 to ${MAX_NAME_LENGTH} characters, got ${length}`;
  const bad = UNPRINTABLE.exec(name);
  if (bad !== null) return `must not contain control, format or line-separator characters (found ${codePointLabel(bad[0])})`;
  return null;
}

/** Throws a RangeError when `name` is not valid: callers check with `nameProblem` first and answer 400 or exit 2. */
export function assertValidName(name: string, what: string): void {
  const problem = nameProblem(name);
  if (problem !== null) throw new RangeError(`${what} ${problem}`);
}
