// A real OpenID Connect provider for the single sign-on test: the certified `oidc-provider` package on
// loopback, with its development login and consent pages (any password). Usage:
//   node oidc-provider.mjs <port> <redirect uri>
// Accounts: `olivia` is in the `agents-operators` and `release-managers` groups, anyone else only in
// `readers`. Prints "ready".
import Provider from 'oidc-provider';

const [port, redirectUri] = process.argv.slice(2);
const provider = new Provider(`http://127.0.0.1:${port}`, {
  clients: [
    {
      client_id: 'durable-agents-inbox',
      client_secret: 'inbox-test-secret',
      redirect_uris: [redirectUri],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_post',
    },
  ],
  pkce: { required: () => true },
  claims: { openid: ['sub'], email: ['email'], profile: ['name', 'groups'] },
  findAccount: async (_ctx, id) => ({
    accountId: id,
    claims: async () => ({
      sub: id,
      email: `${id}@example.test`,
      name: id,
      groups: id === 'olivia' ? ['agents-operators', 'release-managers'] : ['readers'],
    }),
  }),
  features: { devInteractions: { enabled: true } },
  cookies: { keys: ['a-key-for-this-test-only'] },
});
provider.listen(Number(port), '127.0.0.1', () => console.log('ready'));
