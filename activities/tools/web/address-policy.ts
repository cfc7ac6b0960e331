/**
 * Which network addresses `web_fetch` may connect to. Only globally routable unicast addresses pass by
 * default; loopback, private, link-local (cloud metadata at 169.254.169.254 among them), carrier-grade
 * NAT, unique-local, multicast, reserved and unspecified addresses are refused, in IPv4 and IPv6, and so
 * is every IPv6 form that embeds an IPv4 address (`::ffff:127.0.0.1`, NAT64, 6to4, Teredo) unless the
 * embedded address passes too. The operator can allow ranges by CIDR (a test serves pages from loopback;
 * a company lets agents read its intranet).
 *
 * ```ts
 * const policy = addressPolicy(['127.0.0.1/32']);
 * policy.check('127.0.0.1'); // { ok: true }
 * policy.check('::ffff:10.0.0.1'); // { ok: false, reason: 'private address (10.0.0.1)' }
 * ```
 */
import net from 'node:net';
import ipaddr from 'ipaddr.js';

export type AddressVerdict = { ok: true } | { ok: false; reason: string };

export interface AddressPolicy {
  /** The allowlist as given (for messages). */
  readonly allowed: readonly string[];
  /** Whether a connection to this literal IP address (no brackets) is allowed. */
  check(address: string): AddressVerdict;
}

/** ipaddr.js range names, in the words an error message uses. */
const RANGE_WORDS: Record<string, string> = {
  loopback: 'loopback address',
  private: 'private address',
  linkLocal: 'link-local address (cloud metadata lives here)',
  uniqueLocal: 'unique-local address',
  carrierGradeNat: 'carrier-grade NAT address',
  unspecified: 'unspecified address',
  multicast: 'multicast address',
  broadcast: 'broadcast address',
  reserved: 'reserved address',
  benchmarking: 'benchmarking address',
  amt: 'reserved address',
  as112: 'reserved address',
  deprecated: 'deprecated address',
  orchid2: 'reserved address',
  droneRemoteIdProtocolEntityTags: 'reserved address',
};

/** Parses an allowlist of CIDRs or single addresses; a bad entry is an error that names it. */
export function addressPolicy(allow: readonly string[]): AddressPolicy {
  const ranges = allow.map((entry) => {
    const text = entry.trim();
    try {
      if (text.includes('/')) return ipaddr.parseCIDR(text);
      if (!net.isIP(text)) throw new Error('not an address');
      const address = ipaddr.parse(text);
      return [address, address.kind() === 'ipv4' ? 32 : 128] as [ipaddr.IPv4 | ipaddr.IPv6, number];
    } catch {
      throw new Error(
        `web fetch allowlist: ${JSON.stringify(entry)} is not an IP address or CIDR range (examples: 127.0.0.1/32, 10.0.0.0/8, fd00::/8)`,
      );
    }
  });
  const allowedByOperator = (address: ipaddr.IPv4 | ipaddr.IPv6): boolean =>
    ranges.some(([range, bits]) => range.kind() === address.kind() && address.match(range as never, bits));

  return {
    allowed: allow,
    check(text) {
      const literal = text.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
      if (!net.isIP(literal)) return { ok: false, reason: `not an IP address: ${JSON.stringify(text)}` };
      const address = ipaddr.parse(literal);
      if (allowedByOperator(address)) return { ok: true };
      const embedded = embeddedIPv4(address);
      if (embedded) {
        if (allowedByOperator(embedded)) return { ok: true };
        const range = embedded.range();
        return range === 'unicast'
          ? { ok: true }
          : {
              ok: false,
              reason: `${RANGE_WORDS[range] ?? `${range} address`} (${embedded.toString()}, written as ${literal})`,
            };
      }
      const range = address.range();
      if (range === 'unicast') return { ok: true };
      return { ok: false, reason: `${RANGE_WORDS[range] ?? `${range} address`} (${address.toString()})` };
    },
  };
}

/**
 * The IPv4 address an IPv6 address stands for, where it stands for one: IPv4-mapped (`::ffff:a.b.c.d`),
 * IPv4-compatible (`::a.b.c.d`, deprecated but still routed by some stacks), NAT64 (`64:ff9b::/96`),
 * 6to4 (`2002:AABB:CCDD::/48`) and Teredo (the client address, inverted).
 */
function embeddedIPv4(address: ipaddr.IPv4 | ipaddr.IPv6): ipaddr.IPv4 | undefined {
  if (address.kind() !== 'ipv6') return undefined;
  const v6 = address as ipaddr.IPv6;
  const parts = v6.parts;
  const fromWords = (high: number, low: number) => new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address();
  const range = v6.range();
  if (range === 'rfc6052' || range === 'rfc6145') return fromWords(parts[6]!, parts[7]!);
  if (range === '6to4') return fromWords(parts[1]!, parts[2]!);
  if (range === 'teredo') return fromWords(parts[6]! ^ 0xffff, parts[7]! ^ 0xffff);
  // ::a.b.c.d (but not :: or ::1, which are their own ranges).
  if (parts.slice(0, 6).every((p) => p === 0) && range !== 'unspecified' && range !== 'loopback')
    return fromWords(parts[6]!, parts[7]!);
  return undefined;
}
