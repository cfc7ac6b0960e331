import { z } from 'zod';
import { binaryReason, summariseBinary } from '../security/binary';
import { defineTool } from './types';
import { createHash } from 'node:crypto';
import { openInWorkspace, removePartialWrite, replaceWorkspaceFile, WorkspacePathError } from './workspace';

/** Files bigger than this are read in part; the model can page with offset/limit. */
export const FILE_READ_MAX_CHARS = 200_000;
/** A single write larger than this is refused: it is almost certainly a runaway generation. */
export const FILE_WRITE_MAX_CHARS = 2_000_000;
/** Bytes read from a file at most: enough for any text file a model can page through, bounded for a huge one. */
export const FILE_READ_MAX_BYTES = 32 * 1024 * 1024;

/** Refusals and missing files become error results the model can act on; anything else is a tool failure. */
function asToolError(error: unknown): { content: string; isError: true } | undefined {
  if (error instanceof WorkspacePathError) return { content: `Refused: ${error.message}`, isError: true };
  if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { content: (error as Error).message, isError: true };
  return undefined;
}

export const fileRead = defineTool({
  name: 'file_read',
  description:
    'Read a UTF-8 text file from your workspace. Paths are relative to the workspace root. Binary files are described, not shown. ' +
    'Files inside .git and symbolic links are refused: use git commands for repository metadata.',
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
    let data: Buffer;
    let size: number;
    try {
      const file = await openInWorkspace(ctx.workspaceDir, args.path, 'read');
      try {
        size = file.stats.size;
        const buffer = Buffer.alloc(Math.min(size, FILE_READ_MAX_BYTES));
        const { bytesRead } = await file.handle.read(buffer, 0, buffer.length, 0);
        data = buffer.subarray(0, bytesRead);
      } finally {
        await file.handle.close();
      }
    } catch (error) {
      const refusal = asToolError(error);
      if (refusal) return refusal;
      throw error;
    }
    const binary = binaryReason(data);
    if (binary) return { content: summariseBinary(args.path, data, size, binary) };
    const text = data.toString('utf8');
    const offset = args.offset ?? 0;
    const limit = args.limit ?? FILE_READ_MAX_CHARS;
    const slice = text.slice(offset, offset + limit);
    const rest = text.length - offset - slice.length;
    const cut = size > data.length ? `\n[… the file has ${size} bytes; only the first ${data.length} can be read]` : '';
    return {
      content:
        rest > 0
          ? `${slice}\n[… ${rest} more characters; read again with offset=${offset + slice.length}]`
          : `${slice}${cut}`,
    };
  },
});

export const fileWrite = defineTool({
  name: 'file_write',
  description:
    'Create or overwrite a UTF-8 text file in your workspace. Parent folders are created. Paths are relative to the workspace root. ' +
    'Files inside .git, symbolic links and files with several hard links are refused.',
  schema: z
    .object({
      path: z.string().min(1).describe('File path relative to the workspace'),
      content: z.string().max(FILE_WRITE_MAX_CHARS).describe('The full new content of the file'),
    })
    .strict(),
  sideEffecting: true,
  summarize: (a) => `file_write ${a.path} (${a.content.length} chars)`,
  run: async (args, ctx) => {
    try {
      await replaceWorkspaceFile(ctx.workspaceDir, args.path, args.content, partialWriteName(ctx));
    } catch (error) {
      const refusal = asToolError(error);
      if (refusal) return refusal;
      throw error;
    }
    return { content: fileWriteResult(args) };
  },
  // The write's only effect is the rename of its partial file over the target: the target holding
  // exactly this content means it landed (or the file already said so), anything else that it did not.
  interrupted: async (args, ctx) => {
    await removePartialWrite(ctx.workspaceDir, args.path, partialWriteName(ctx));
    const now = await readWorkspaceText(ctx.workspaceDir, args.path);
    return now === args.content ? { landed: true, content: fileWriteResult(args) } : { landed: false };
  },
});

function fileWriteResult(args: { path: string; content: string }): string {
  return `wrote ${args.content.length} characters to ${args.path}`;
}

/** A workspace file's text through the workspace checks, or undefined when it is missing or refused. */
async function readWorkspaceText(workspaceDir: string, requested: string): Promise<string | undefined> {
  try {
    const file = await openInWorkspace(workspaceDir, requested, 'read');
    try {
      return await file.handle.readFile('utf8');
    } finally {
      await file.handle.close();
    }
  } catch {
    return undefined;
  }
}

/** The partial file of one write: named after its ledger key, so the call that was cut off can find it. */
export function partialWriteName(ctx: { sessionId: string; toolCallId: string }): string {
  const key = createHash('sha256').update(`${ctx.sessionId}\0${ctx.toolCallId}`).digest('hex').slice(0, 16);
  return `.file-write-${key}.partial`;
}
