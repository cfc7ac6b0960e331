import { addressPolicy } from '../../activities/tools/web/address-policy';
import { webToolsConfigFromEnv } from '../../activities/tools/web/config';

/** The address policy of web_fetch: only global unicast passes unless the operator allows a range. */
describe('web_fetch address policy', () => {
  const closed = addressPolicy([]);

  test.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.0.9', 'loopback'],
    ['::1', 'loopback'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.169.254', 'link-local'],
    ['fe80::1', 'link-local'],
    ['fd00:ec2::254', 'unique-local'],
    ['100.100.100.200', 'carrier-grade NAT'],
    ['0.0.0.0', 'unspecified'],
    ['::', 'unspecified'],
    ['224.0.0.1', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    // IPv6 forms that carry an IPv4 address: the embedded one is judged.
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:169.254.169.254', 'link-local'],
    ['::127.0.0.1', 'loopback'],
    ['64:ff9b::a00:1', 'private'],
    ['2002:7f00:1::', 'loopback'],
    ['2002:a9fe:a9fe::1', 'link-local'],
  ])('%s is refused as %s', (address, words) => {
    const verdict = closed.check(address);
    expect(verdict.ok).toBe(false);
    expect(verdict.ok ? '' : verdict.reason).toContain(words);
  });

  test.each([
    '93.184.215.14',
    '8.8.8.8',
    '2606:4700:4700::1111',
    '::ffff:8.8.8.8',
    '2002:808:808::1',
    '64:ff9b::808:808',
  ])('%s (public) passes', (address) => {
    expect(closed.check(address)).toEqual({ ok: true });
  });

  test('the operator allowlist opens exactly its ranges, also through the mapped IPv6 form', () => {
    const policy = addressPolicy(['127.0.0.1/32', '10.0.0.0/8', 'fd00::/8']);
    expect(policy.check('127.0.0.1')).toEqual({ ok: true });
    expect(policy.check('::ffff:127.0.0.1')).toEqual({ ok: true });
    expect(policy.check('10.200.0.1')).toEqual({ ok: true });
    expect(policy.check('fd12::1')).toEqual({ ok: true });
    expect(policy.check('127.0.0.2').ok).toBe(false);
    expect(policy.check('192.168.0.1').ok).toBe(false);
    expect(policy.check('169.254.169.254').ok).toBe(false);
  });

  test('bad allowlist entries and bad settings are refused with the fix', () => {
    expect(() => addressPolicy(['localhost'])).toThrow(/"localhost" is not an IP address or CIDR range/);
    expect(() => addressPolicy(['10.0.0.0/33'])).toThrow(/not an IP address or CIDR/);
    expect(() => webToolsConfigFromEnv({ WEB_FETCH_ALLOW: '127.0.0.1, nope' })).toThrow(/"nope"/);
    expect(() => webToolsConfigFromEnv({ WEB_SEARCH_PROVIDER: 'google' })).toThrow(/use one of brave, searxng/);
    expect(() => webToolsConfigFromEnv({ WEB_SEARCH_PROVIDER: 'searxng' })).toThrow(/needs WEB_SEARCH_URL/);
    expect(() => webToolsConfigFromEnv({ WEB_SEARCH_PROVIDER: 'brave' })).toThrow(/needs WEB_SEARCH_API_KEY/);
    expect(() => webToolsConfigFromEnv({ WEB_FETCH: 'maybe' })).toThrow(/use on or off/);
  });

  test('the environment: fetch on by default, search only when a provider is named', () => {
    const plain = webToolsConfigFromEnv({});
    expect(plain.fetchEnabled).toBe(true);
    expect(plain.search).toBeUndefined();
    expect(plain.policy.check('127.0.0.1').ok).toBe(false);
    expect(webToolsConfigFromEnv({ WEB_FETCH: 'off' }).fetchEnabled).toBe(false);
    const configured = webToolsConfigFromEnv({
      WEB_SEARCH_PROVIDER: 'brave',
      WEB_SEARCH_API_KEY: 'bsa-test-key',
      WEB_FETCH_ALLOW: '127.0.0.1/32',
    });
    expect(configured.search).toEqual({
      kind: 'brave',
      url: 'https://api.search.brave.com/res/v1/web/search',
      apiKey: 'bsa-test-key',
    });
    expect(configured.policy.check('127.0.0.1')).toEqual({ ok: true });
  });
});
