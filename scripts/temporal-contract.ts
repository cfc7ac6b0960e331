/**
 * `npm run contract:schema`: writes the Temporal contract's JSON Schema (api/temporal-contract.ts) to
 * docs/temporal-contract.schema.json, the committed copy other-language services read. The unit test
 * fails when the committed copy is not what the zod schemas generate.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { renderTemporalContract, TEMPORAL_CONTRACT_FILE } from '../api/temporal-contract';

writeFileSync(TEMPORAL_CONTRACT_FILE, renderTemporalContract());
console.log(`wrote ${path.relative(process.cwd(), TEMPORAL_CONTRACT_FILE)}`);
