import t from 'tap';
import { canonicalOrigin, compileOrigins, normaliseOriginEntry, originEntryProblem } from '../../src/fences/origins.js';

t.test('entries: origins and *. wildcards over http(s), nothing else', async (t) => {
  for (const good of [
    'https://app.example.com',
    'http://localhost:3000',
    '*.example.com',
    'https://*.example.com:8443',
    'app.example.com',
    'HTTPS://APP.Example.com/',
  ]) {
    t.equal(originEntryProblem(good), undefined, good);
  }
  const bad: Array<[string, RegExp]> = [
    ['ftp://example.com', /scheme must be http or https/],
    ['https://example.com/path', /without a path/],
    ['https://user@example.com', /without a path, query or user/],
    ['https://a.*.example.com', /'\*' may only open the host/],
    ['*', /without a path|'\*'/],
    ['*.com', /two labels or more/],
    ['example.com:443', /ambiguous/],
    ['https://exa mple.com', /without a path/],
    ['https://[zz]', /not a valid host/],
  ];
  for (const [entry, why] of bad) t.match(originEntryProblem(entry), why, entry);
});

t.test('entries are stored lower-case, without the default port or a trailing slash', async (t) => {
  t.equal(normaliseOriginEntry('HTTPS://App.Example.COM:443/'), 'https://app.example.com');
  t.equal(normaliseOriginEntry('http://localhost:80'), 'http://localhost');
  t.equal(normaliseOriginEntry('*.Example.com'), '*.example.com');
  t.equal(normaliseOriginEntry('https://bücher.example'), 'https://xn--bcher-kva.example');
  t.throws(() => normaliseOriginEntry('ftp://x.com'));
});

t.test('a browser Origin against the list', async (t) => {
  const allowed = compileOrigins(['https://app.example.com', 'http://localhost:3000', '*.dapp.xyz', 'https://*.shop.io:8443']);
  const cases: Array<[string, boolean]> = [
    ['https://app.example.com', true],
    ['https://app.example.com:443', true],
    ['HTTPS://APP.EXAMPLE.COM', true],
    ['http://app.example.com', false],
    ['https://app.example.com:8443', false],
    ['https://evil.example.com', false],
    ['https://app.example.com.evil.io', false],
    ['http://localhost:3000', true],
    ['http://localhost', false],
    ['https://a.dapp.xyz', true],
    ['http://a.dapp.xyz', true],
    ['https://a.b.c.dapp.xyz', true],
    ['https://dapp.xyz', false],
    ['https://notdapp.xyz', false],
    ['https://x.shop.io:8443', true],
    ['https://x.shop.io', false],
    ['null', false],
    ['', false],
    ['https://app.example.com/path', false],
    ['garbage', false],
  ];
  for (const [origin, expected] of cases)
    t.equal(allowed(origin), expected, `${JSON.stringify(origin)} ${expected ? 'allowed' : 'refused'}`);
});

t.test('an invalid entry in a list matches nothing (lists are validated before they are stored)', async (t) => {
  const allowed = compileOrigins(['ftp://example.com']);
  t.equal(allowed('ftp://example.com'), false);
});

t.test('canonicalOrigin spells an origin as browsers do', async (t) => {
  t.equal(canonicalOrigin('https://a.io'), 'https://a.io');
  t.equal(canonicalOrigin('https://a.io:443'), 'https://a.io');
  t.equal(canonicalOrigin('http://a.io:80'), 'http://a.io');
  t.equal(canonicalOrigin('http://a.io:8080'), 'http://a.io:8080');
  t.equal(canonicalOrigin('HTTP://A.io'), 'http://a.io');
  t.equal(canonicalOrigin('chrome-extension://abc'), undefined);
  t.equal(canonicalOrigin('https://a.io?x=1'), undefined);
  t.equal(canonicalOrigin('null'), undefined);
});
