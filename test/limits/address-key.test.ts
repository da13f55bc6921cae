/**
 * The address per-IP limits count under: IPv4 per address, IPv6 by its prefix, IPv4-mapped as IPv4, from
 * uWS's bytes and from X-Forwarded-For's text alike.
 */
import t from 'tap';
import { isIP } from 'node:net';
import { addressKeyOfBytes, addressKeyOfText } from '../../src/limits/address-key.js';

/** The 16 bytes of an IPv6 address written in full (8 groups, no `::`). */
function bytesOf(full: string): Uint8Array {
  const out = new Uint8Array(16);
  full.split(':').forEach((g, i) => {
    const v = Number.parseInt(g, 16);
    out[2 * i] = v >> 8;
    out[2 * i + 1] = v & 0xff;
  });
  return out;
}

t.test('IPv6 text: every form of one address gives one key, the /64 its clients share', async (t) => {
  const forms = [
    '2001:db8:1:2::1',
    '2001:0db8:0001:0002:0000:0000:0000:0001',
    '2001:DB8:1:2:0:0:0:1',
    '2001:db8:1:2::0.0.0.1',
    '[2001:db8:1:2::1]',
    '[2001:db8:1:2::1]:443',
    '2001:db8:1:2::1%eth0',
  ];
  for (const f of forms) t.equal(addressKeyOfText(f, 64), '2001:db8:1:2::/64', f);
});

t.test('IPv6: the forty addresses of one /64 share a key, a neighbouring /64 has its own', async (t) => {
  const keys = new Set<string>();
  for (let i = 1; i <= 40; i++) keys.add(addressKeyOfText(`2001:db8:1:2::${i.toString(16)}`, 64));
  t.same([...keys], ['2001:db8:1:2::/64']);
  t.equal(addressKeyOfText('2001:db8:1:3::1', 64), '2001:db8:1:3::/64');
  t.equal(addressKeyOfText('2001:db8:1:2:ffff:ffff:ffff:ffff', 64), '2001:db8:1:2::/64', 'the last address of the /64');
});

t.test('IPv6: the prefix length cuts where it says, inside a group too', async (t) => {
  const cases: Array<[number, string]> = [
    [1, '0::/1'],
    [16, '2001::/16'],
    [48, '2001:db8:1::/48'],
    [56, '2001:db8:1:200::/56'],
    [60, '2001:db8:1:2a0::/60'],
    [64, '2001:db8:1:2ab::/64'],
    [112, '2001:db8:1:2ab:0:0:cd::/112'],
    [120, '2001:db8:1:2ab:0:0:cd:ef00/120'],
    [128, '2001:db8:1:2ab:0:0:cd:ef12/128'],
  ];
  for (const [prefix, key] of cases) t.equal(addressKeyOfText('2001:db8:1:2ab::cd:ef12', prefix), key, `/${prefix}`);
  t.equal(addressKeyOfText('8000::1', 1), '8000::/1', 'the top bit alone');
});

t.test('IPv4-mapped IPv6 counts as its IPv4 address, in every form', async (t) => {
  for (const f of ['::ffff:1.2.3.4', '::FFFF:0102:0304', '::ffff:102:304', '0:0:0:0:0:ffff:1.2.3.4', '[::ffff:1.2.3.4]:80']) {
    t.equal(addressKeyOfText(f, 64), '1.2.3.4', f);
  }
  t.equal(addressKeyOfBytes(bytesOf('0:0:0:0:0:ffff:0102:0304'), 64), '1.2.3.4', 'bytes');
  t.equal(addressKeyOfText('::1.2.3.4', 64), '0:0:0:0::/64', 'the IPv4-compatible form (deprecated) is IPv6, not mapped');
  t.equal(addressKeyOfText('::fffe:1.2.3.4', 128), '0:0:0:0:0:fffe:102:304/128', 'not ffff: not mapped');
});

t.test('IPv4 stays per address', async (t) => {
  const cases: Array<[string, string]> = [
    ['203.0.113.9', '203.0.113.9'],
    ['203.0.113.10', '203.0.113.10'],
    ['0.0.0.0', '0.0.0.0'],
    ['255.255.255.255', '255.255.255.255'],
    ['203.000.113.009', '203.0.113.9'],
    ['203.0.113.9:5678', '203.0.113.9'],
    ['[203.0.113.9]', '203.0.113.9'],
  ];
  for (const [text, key] of cases) t.equal(addressKeyOfText(text, 64), key, text);
  const canonical = '198.51.100.7';
  t.equal(addressKeyOfText(canonical, 64), canonical, 'canonical text is its own key');
  t.equal(addressKeyOfBytes(new Uint8Array([198, 51, 100, 7]), 64), '198.51.100.7', 'bytes');
});

t.test('text that is no address is its own key', async (t) => {
  const junk = [
    'unknown',
    '',
    '1.2.3',
    '1.2.3.4.5',
    '256.1.1.1',
    '1.2.3.-4',
    '1:2:3:4:5:6:7',
    '1:2:3:4:5:6:7:8:9',
    '1::2::3',
    '12345::1',
    'g::1',
    '::ffff:1.2.3.256',
    '1:2:3:4:5:6:7::8',
    'a:b',
  ];
  for (const j of junk) {
    t.equal(isIP(j), 0, `${JSON.stringify(j)} is no address to node:net either`);
    t.equal(addressKeyOfText(j, 64), j, JSON.stringify(j));
  }
  t.equal(addressKeyOfText('[2001:db8::1', 64), '[2001:db8::1', 'an unclosed bracket');
});

t.test('bytes and text of one address give the same key', async (t) => {
  const full = [
    '2001:0db8:0001:0002:0000:0000:0000:0028',
    '0000:0000:0000:0000:0000:0000:0000:0001',
    'fe80:0000:0000:0000:1234:5678:9abc:def0',
  ];
  for (const f of full) {
    for (const prefix of [48, 64, 128]) t.equal(addressKeyOfBytes(bytesOf(f), prefix), addressKeyOfText(f, prefix), `${f}/${prefix}`);
  }
  t.equal(addressKeyOfBytes(bytesOf('0000:0000:0000:0000:0000:0000:0000:0001'), 64), '0:0:0:0::/64', '::1 by /64');
  t.equal(addressKeyOfBytes(new Uint8Array(3), 64), null, 'a length uWS never gives');
});
