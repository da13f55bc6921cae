/** Where a webhook may be sent (issue 36 §3): https and public addresses only, unless the operator allows. */
import t from 'tap';
import { backoffMs, BACKOFF_MS, postOnce } from '../../src/alerts/delivery.js';
import { signDelivery, verifyDelivery } from '../../src/alerts/signature.js';
import { addressProblem, checkHost, parseWebhookUrl } from '../../src/alerts/url-guard.js';

t.test('every address outside public unicast is refused, naming its range', async (t) => {
  for (const [address, range] of [
    ['127.0.0.1', 'loopback'],
    ['::1', 'loopback'],
    ['10.0.0.1', 'private'],
    ['172.16.5.4', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.169.254', 'linkLocal'],
    ['fe80::1', 'linkLocal'],
    ['fd00::1', 'uniqueLocal'],
    ['100.64.0.1', 'carrierGradeNat'],
    ['0.0.0.0', 'unspecified'],
    ['::ffff:10.0.0.1', 'private'],
    ['224.0.0.1', 'multicast'],
  ] as const) {
    t.match(addressProblem(address, false), new RegExp(`a ${range} address`), address);
    t.equal(addressProblem(address, true), null, `${address} with the allowance`);
  }
  t.equal(addressProblem('93.184.215.14', false), null);
  t.equal(addressProblem('2606:2800:21f:cb07:6820:80da:af6b:8b2c', false), null);
});

t.test('the URL: https only without the allowance, no credentials, hosts resolved', async (t) => {
  t.match(parseWebhookUrl('http://example.com/', false), { ok: false, problem: 'must be an https:// URL' });
  t.match(parseWebhookUrl('http://example.com/', true), { ok: true });
  t.match(parseWebhookUrl('ftp://example.com/', true), { ok: false });
  t.match(parseWebhookUrl('https://u:p@example.com/', false), { ok: false, problem: /user or password/ });
  t.match(parseWebhookUrl('not a url', false), { ok: false, problem: 'is not a URL' });
  t.match(await checkHost('localhost', false), /resolves to .* loopback/);
  t.equal(await checkHost('localhost', true), null);
  // A delivery to a private address is refused where it connects, not sent.
  t.match(await postOnce('https://127.0.0.1:1/', {}, '{}', { allowPrivate: false, timeoutMs: 1000 }), { error: /refused: .*loopback/ });
});

t.test('backoff doubles from 1 s to at most 5 min; a signature verifies only with its secret and body', async (t) => {
  t.same([1, 2, 3, 4].map(backoffMs), [1000, 2000, 4000, 8000]);
  t.equal(backoffMs(30), BACKOFF_MS.max);
  const sig = signDelivery('secret-secret-secret', '1700000000', '{"a":1}');
  t.match(sig, /^sha256=[0-9a-f]{64}$/);
  t.ok(verifyDelivery('secret-secret-secret', '1700000000', '{"a":1}', sig));
  t.notOk(verifyDelivery('secret-secret-secret', '1700000001', '{"a":1}', sig), 'another timestamp');
  t.notOk(verifyDelivery('secret-secret-secret', '1700000000', '{"a":2}', sig), 'another body');
});
