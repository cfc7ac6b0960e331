import { randomUUID } from 'node:crypto';
import { NativeConnection } from '@temporalio/worker';
import { PRODUCT_SEARCH_ATTRIBUTES } from '../../workflows/contract';
import { checkSearchAttributes, MissingSearchAttributesError } from '../../worker/search-attributes';
import { eventually } from '../support/eventually';
import { temporalCli } from '../support/temporal-cli';

/** The worker refuses a namespace that lacks the product's search attributes, naming them and the fix. */
describe("the worker's search-attribute check (real Temporal server)", () => {
  let connection: NativeConnection;
  beforeAll(async () => {
    connection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS! });
  });
  afterAll(async () => connection?.close());

  test('the test namespace has them all: the check passes', async () => {
    await expect(checkSearchAttributes(connection, 'default')).resolves.toBeUndefined();
  });

  test('a namespace without them is refused with every missing name and the commands that register them', async () => {
    const namespace = `sa-check-${randomUUID().slice(0, 8)}`;
    await temporalCli(['operator', 'namespace', 'create', '--namespace', namespace]);
    // A new namespace reaches the server's namespace cache within seconds.
    const error = await eventually(
      async () => {
        const e = await checkSearchAttributes(connection, namespace).then(
          () => undefined,
          (thrown: unknown) => thrown,
        );
        return e instanceof MissingSearchAttributesError ? e : undefined;
      },
      'the new namespace to be served',
      20_000,
    );
    expect(error).toBeInstanceOf(MissingSearchAttributesError);
    const message = (error as Error).message;
    expect(message).toContain(`the Temporal namespace "${namespace}" lacks the product's search attributes`);
    for (const key of PRODUCT_SEARCH_ATTRIBUTES) {
      expect(message).toContain(`${key.name} is not registered`);
      expect(message).toContain(
        `temporal operator search-attribute create --namespace ${namespace} --name ${key.name} --type Keyword`,
      );
    }
  });
});
