import t from 'tap';
import { intOption, parseArgs } from '../../src/cli/args.js';

t.test('intOption reads decimal digits only, within its bounds', async (t) => {
  const read = (value: string, min = 0, max = 65535) => intOption(parseArgs(['--port', value], ['port'], []), 'port', min, max);
  t.equal(read('8080'), 8080);
  t.equal(read('0'), 0);
  t.equal(read('08080'), 8080, 'leading zeros are decimal, not octal');
  t.equal(read('9007199254740991', 1, Number.MAX_SAFE_INTEGER), Number.MAX_SAFE_INTEGER);
  for (const value of ['0x1F90', '0o17', '0b11', '8e3', '8080.0', '+80', '-1', ' 80', '80 ', '65536', '١٢']) {
    t.throws(() => read(value), new Error('--port must be a decimal integer from 0 to 65535'), JSON.stringify(value));
  }
  t.throws(
    () => read('9007199254740992', 1, Number.MAX_SAFE_INTEGER),
    new Error('--port must be a decimal integer from 1 to 9007199254740991'),
  );
  t.equal(intOption(parseArgs([], ['port'], []), 'port', 0, 1), undefined);
});
