import t from 'tap';
import ipaddr from 'ipaddr.js';
import { compileIpRanges, ipEntryProblem, ipv6Bytes, normaliseIpEntry } from '../../src/fences/ip-ranges.js';

t.test('entries: IPv4 and IPv6 addresses and CIDR ranges', async (t) => {
  for (const good of ['192.0.2.1', '192.0.2.0/24', '0.0.0.0/0', '2001:db8::/32', '::1', '::ffff:10.0.0.0/104', '2001:db8::1/128']) {
    t.equal(ipEntryProblem(good), undefined, good);
  }
  const bad: Array<[string, RegExp]> = [
    ['127.1', /four decimal numbers/],
    ['0x7f.0.0.1', /four decimal numbers/],
    ['192.0.2.0/33', /prefix length is a number from 0 to 32/],
    ['2001:db8::/129', /from 0 to 128/],
    ['192.0.2.1/24', /host bits are set after the \/24 prefix: did you mean 192\.0\.2\.0\/24\?/],
    ['2001:db8::1/32', /did you mean 2001:db8::\/32\?/],
    ['fe80::1%eth0', /not an IPv6 address/],
    ['example.com', /four decimal numbers/],
    ['192.0.2.0/', /prefix length/],
    ['192.0.2.0/+8', /prefix length/],
  ];
  for (const [entry, why] of bad) t.match(ipEntryProblem(entry), why, entry);
});

t.test('entries are stored as network/prefix; an IPv4-mapped range as its IPv4 range', async (t) => {
  t.equal(normaliseIpEntry('192.0.2.1'), '192.0.2.1/32');
  t.equal(normaliseIpEntry('2001:0db8:0000::/32'), '2001:db8::/32');
  t.equal(normaliseIpEntry('::ffff:10.0.0.0/104'), '10.0.0.0/8');
  t.equal(normaliseIpEntry('::ffff:192.0.2.7'), '192.0.2.7/32');
  t.throws(() => normaliseIpEntry('nope'));
});

t.test('client addresses against the list, as text and as socket bytes', async (t) => {
  const m = compileIpRanges(['10.0.0.0/8', '192.0.2.7', '2001:db8:abcd::/48', '::ffff:172.16.0.0/108', '2001:db8:ffff::1']);
  const cases: Array<[string, boolean]> = [
    ['10.1.2.3', true],
    ['11.0.0.1', false],
    ['192.0.2.7', true],
    ['192.0.2.8', false],
    ['::ffff:10.9.9.9', true],
    ['::ffff:11.0.0.1', false],
    ['0:0:0:0:0:ffff:0a00:0001', true],
    ['172.16.5.5', true],
    ['172.32.0.1', false],
    ['2001:db8:abcd:1::5', true],
    ['2001:db8:abce::5', false],
    ['2001:db8:ffff::1', true],
    ['2001:db8:ffff::2', false],
    ['[2001:db8:abcd::1]', true],
    ['fe80::1%eth0', false],
    ['010.1.2.3', false],
    ['not an address', false],
    ['', false],
  ];
  for (const [address, expected] of cases) t.equal(m.matchesText(address), expected, `${address} ${expected ? 'allowed' : 'refused'}`);
  t.equal(m.matchesBytes(Uint8Array.from([10, 0, 0, 1])), true, 'IPv4 bytes');
  t.equal(m.matchesBytes(Uint8Array.from([12, 0, 0, 1])), false);
  t.equal(m.matchesBytes(Uint8Array.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 1, 1, 1])), true, 'IPv4-mapped bytes');
  t.equal(m.matchesBytes(Uint8Array.from([0x20, 0x01, 0x0d, 0xb8, 0xab, 0xcd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9])), true, 'IPv6 bytes');
  t.equal(m.matchesBytes(Uint8Array.from([1, 2, 3])), false, 'neither length');
});

t.test('odd prefix lengths and the whole space', async (t) => {
  const m = compileIpRanges(['192.0.2.128/25', '2001:db8:8000::/33']);
  t.equal(m.matchesText('192.0.2.127'), false);
  t.equal(m.matchesText('192.0.2.128'), true);
  t.equal(m.matchesText('192.0.2.255'), true);
  t.equal(m.matchesText('2001:db8:7fff::1'), false);
  t.equal(m.matchesText('2001:db8:8000::1'), true);
  const all = compileIpRanges(['0.0.0.0/0', '::/0']);
  t.equal(all.matchesText('203.0.113.9'), true);
  t.equal(all.matchesText('2001:db8::9'), true);
  const none = compileIpRanges(['0.0.0.0/0']);
  t.equal(none.matchesText('2001:db8::9'), false, 'an IPv4 range does not match IPv6 clients');
});

t.test('IPv6 text is read as ipaddr.js reads it', async (t) => {
  const readable = [
    '::',
    '::1',
    '1::',
    '2001:db8::1',
    '2001:0db8:0000:0000:0000:0000:0000:0001',
    'fe80::1:2:3:4',
    '1:2:3:4:5:6:7:8',
    '1:2:3:4:5:6:7::',
    '::2:3:4:5:6:7:8',
    '::ffff:192.0.2.1',
    '64:ff9b::192.0.2.33',
    '1:2:3:4:5:6:1.2.3.4',
    'ABCD:ef01::',
  ];
  for (const text of readable) t.same(ipv6Bytes(text), Uint8Array.from(ipaddr.parse(text).toByteArray()), text);
  for (const text of [
    '1:2:3:4:5:6:7:8:9',
    '1::2::3',
    ':1',
    '1:',
    '12345::',
    'g::',
    '1:2:3:4:5:6:7',
    '::1.2.3',
    '::256.0.0.1',
    '1.2.3.4::',
    '::1:2:3:4:5:6:7:8',
  ]) {
    t.equal(ipv6Bytes(text), undefined, text);
    t.notOk(ipaddr.IPv6.isValid(text), `ipaddr.js refuses ${text} too`);
  }
});

t.test('IPv6 text in each form ipaddr.js writes, over many addresses', async (t) => {
  let seed = 7;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
  let agreed = 0;
  for (let n = 0; n < 2000; n++) {
    // Words often zero, so that `::` runs of every length and place occur.
    const parts = Array.from({ length: 8 }, () => (next() % 3 === 0 ? next() % 65536 : 0));
    const address = new ipaddr.IPv6(parts);
    const bytes = Uint8Array.from(address.toByteArray());
    for (const text of [address.toString(), address.toNormalizedString(), address.toRFC5952String()]) {
      if (ipv6Bytes(text)?.every((b, i) => b === bytes[i])) agreed++;
      else t.fail(`${text} read otherwise`);
    }
  }
  t.equal(agreed, 6000);
});
