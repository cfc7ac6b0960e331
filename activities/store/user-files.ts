/**
 * Reading a text file a user pointed at (an agent, organisation or skills folder): only a regular file,
 * and only up to a size, so a link to `/dev/zero`, a named pipe or a huge file is refused in words
 * instead of reading forever or filling memory.
 */
import { constants, promises as fs } from 'node:fs';

/** Far above any identity file, profile or skill the stores accept (their own limits say the rest). */
export const USER_TEXT_FILE_MAX_BYTES = 4 * 1024 * 1024;

/** A file a user named that cannot be read as text; the message says which and why. */
export class UnreadableUserFileError extends Error {
  readonly type = 'UnreadableUserFile';
  constructor(
    readonly file: string,
    reason: string,
  ) {
    super(`${file} ${reason}`);
    this.name = 'UnreadableUserFileError';
  }
}

/**
 * The file's text, or undefined when it does not exist. The file is opened without blocking (a pipe
 * would otherwise wait for a writer) and checked on the open handle, so a swap after a check cannot
 * slip a device in.
 */
export async function readUserTextFile(file: string, maxBytes = USER_TEXT_FILE_MAX_BYTES): Promise<string | undefined> {
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    throw new UnreadableUserFileError(file, `cannot be opened: ${code ?? (error as Error).message}`);
  }
  try {
    const stats = await handle.stat();
    if (!stats.isFile())
      throw new UnreadableUserFileError(
        file,
        `is not a regular file (${stats.isDirectory() ? 'a folder' : 'a device, pipe or socket'})`,
      );
    if (stats.size > maxBytes)
      throw new UnreadableUserFileError(
        file,
        `is ${stats.size} bytes, more than the ${maxBytes} a text file here may have`,
      );
    return await handle.readFile('utf8');
  } finally {
    await handle.close();
  }
}
