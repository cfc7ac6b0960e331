/**
 * The product's search attributes must exist on the namespace before a worker serves it: a workflow
 * that upserts an unregistered attribute fails its workflow task over and over, far from the cause.
 * Checked once at start-up, with the command that fixes it.
 */
import type { NativeConnection } from '@temporalio/worker';
import { PRODUCT_SEARCH_ATTRIBUTES } from '../workflows/contract';

/** A namespace without the product's search attributes: starting again does not help, registering them does. */
export class MissingSearchAttributesError extends Error {
  override name = 'MissingSearchAttributesError';
}

/** `IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD` in Temporal's API (temporal/api/enums/v1/common.proto). */
const KEYWORD = 2;
const TYPE_NAMES: Record<number, string> = {
  1: 'Text',
  2: 'Keyword',
  3: 'Int',
  4: 'Double',
  5: 'Bool',
  6: 'Datetime',
  7: 'KeywordList',
};

/**
 * Throws `MissingSearchAttributesError` naming what is missing and the commands that register it. Returns
 * the reason when the server would not list them (some hosted services keep the operator API to
 * themselves): the check is then skipped, not the worker.
 */
export async function checkSearchAttributes(
  connection: Pick<NativeConnection, 'operatorService'>,
  namespace: string,
): Promise<string | undefined> {
  let customAttributes: Record<string, number> | null | undefined;
  try {
    ({ customAttributes } = await connection.operatorService.listSearchAttributes({ namespace }));
  } catch (error) {
    return `could not list the namespace's search attributes (${error instanceof Error ? error.message : String(error)}); not checked`;
  }
  const problems = PRODUCT_SEARCH_ATTRIBUTES.flatMap((key) => {
    const type = customAttributes?.[key.name];
    if (type === undefined) return [`${key.name} is not registered`];
    return type === KEYWORD ? [] : [`${key.name} is registered as ${TYPE_NAMES[type] ?? `type ${type}`}, not Keyword`];
  });
  if (problems.length === 0) return undefined;
  const commands = PRODUCT_SEARCH_ATTRIBUTES.filter((key) => customAttributes?.[key.name] === undefined).map(
    (key) => `temporal operator search-attribute create --namespace ${namespace} --name ${key.name} --type Keyword`,
  );
  throw new MissingSearchAttributesError(
    `the Temporal namespace "${namespace}" lacks the product's search attributes: ${problems.join('; ')}` +
      (commands.length ? `. Register them: ${commands.join(' && ')}` : ''),
  );
}
