import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { defineTool } from './types';
import { resolveInWorkspace } from './workspace';

/** Files bigger than this are read in part; the model can page with offset/limit. */
export const FILE_READ_MAX_CHARS = 200_000;
/** A single write larger than this is refused: it is almost certainly a runaway generation. */
export const FILE_WRITE_MAX_CHARS = 2_000_000;

export const fileRead = defineTool({
  name: 'file_read',
  description: 'Read a UTF-8 text file from your workspace. Paths are relative to the workspace root.',
  schema: z
    .object({
      path: z.string().min(1).describe('File path relative to the workspace'),
      offset: z.number().int().min(0).optional().describe('Character offset to start reading from'),
      limit: z.number().int().min(1).max(FILE_READ_MAX_CHARS).optional().describe('Maximum characters to return'),
    })
    .strict(),
  sideEffecting: false,
  summarize: (a) => `file_read ${a.path}`,
  run: async (args, ctx) => {
    const target = await resolveInWorkspace(ctx.workspaceDir, args.path);
    const info = await stat(target).catch(() => undefined);
    if (!info) return { content: `file not found: ${args.path}`, isError: true };
    if (!info.isFile()) return { content: `not a regular file: ${args.path}`, isError: true };
    const text = await readFile(target, 'utf8');
    const offset = args.offset ?? 0;
    const limit = args.limit ?? FILE_READ_MAX_CHARS;
    const slice = text.slice(offset, offset + limit);
    const rest = text.length - offset - slice.length;
    return { content: rest > 0 ? `${slice}\n[… ${rest} more characters; read again with offset=${offset + slice.length}]` : slice };
  },
});

export const fileWrite = defineTool({
  name: 'file_write',
  description: 'Create or overwrite a UTF-8 text file in your workspace. Parent folders are created. Paths are relative to the workspace root.',
  schema: z
    .object({
      path: z.string().min(1).describe('File path relative to the workspace'),
      content: z.string().max(FILE_WRITE_MAX_CHARS).describe('The full new content of the file'),
    })
    .strict(),
  sideEffecting: true,
  summarize: (a) => `file_write ${a.path} (${a.content.length} chars)`,
  run: async (args, ctx) => {
    const target = await resolveInWorkspace(ctx.workspaceDir, args.path);
    await mkdir(path.dirname(target), { recursive: true });
    await writeFile(target, args.content, 'utf8');
    return { content: `wrote ${args.content.length} characters to ${args.path}` };
  },
});
