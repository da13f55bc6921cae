/** errorText: what a log field or a reply says of anything thrown, without throwing again. */
import t from 'tap';
import { errorText } from '../../src/log.js';

t.test('an Error gives its message; anything else thrown gives itself as text', async (t) => {
  t.equal(errorText(new Error('connect ECONNREFUSED')), 'connect ECONNREFUSED');
  t.equal(errorText(new RangeError('')), 'RangeError', 'an Error without a message names its kind');
  t.equal(errorText('a plain string'), 'a plain string');
  t.equal(errorText(undefined), 'undefined', 'a rejection with nothing does not throw here');
  t.equal(errorText(null), 'null');
  t.equal(errorText({ message: 'from another realm' }), 'from another realm', 'an error copied from a worker thread');
  t.equal(errorText(42), '42');
});
