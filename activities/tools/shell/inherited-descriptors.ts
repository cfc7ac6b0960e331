/**
 * Open files the worker inherited from whatever started it must not reach a tool process.
 *
 * Node's `child_process` (libuv's `uv_spawn`) does not close descriptors between fork and exec: it
 * relies on close-on-exec. Node, libuv and the Temporal core open everything close-on-exec, and at
 * start Node marks descriptors 0–15 so, but a descriptor the worker inherited without the flag above
 * that range (a parent shell's `exec 20>/tmp/x`, a supervisor's socket) passes to every child, and
 * bubblewrap hands it on to the sandboxed command, which can then read or write it past every
 * namespace. No option of bubblewrap closes it, and the shell the launch goes through cannot name a
 * descriptor above 9, so it is closed here, in the worker, before each launch.
 *
 * What is closed: every descriptor above 2 without close-on-exec, except Node's IPC channel with a
 * parent. Only an inherited descriptor looks like that; a library that opened one without the flag
 * would be leaking it into every child process anyway.
 */
import { closeSync, readdirSync, readFileSync } from 'node:fs';

/** `O_CLOEXEC` in the octal `flags:` line of `/proc/self/fdinfo/<fd>`: set means children never see the descriptor. */
const O_CLOEXEC = 0o2000000;
/** stdin, stdout and stderr are replaced by each child's own stdio, so they are left alone. */
const LAST_STANDARD_DESCRIPTOR = 2;

/**
 * Closes the worker's descriptors that a child process would inherit, and returns their numbers.
 * Idempotent and cheap (a read of `/proc/self/fdinfo`); does nothing where `/proc` is not mounted.
 */
export function closeInheritableDescriptors(): number[] {
  let names: string[];
  try {
    names = readdirSync('/proc/self/fdinfo');
  } catch {
    return [];
  }
  const ipcChannel = (process.channel as { fd?: number } | undefined)?.fd;
  const closed: number[] = [];
  for (const name of names) {
    const fd = Number(name);
    if (!Number.isInteger(fd) || fd <= LAST_STANDARD_DESCRIPTOR || fd === ipcChannel) continue;
    if (!inheritable(fd)) continue;
    try {
      closeSync(fd);
      closed.push(fd);
    } catch {
      // Closed meanwhile.
    }
  }
  return closed;
}

function inheritable(fd: number): boolean {
  let info: string;
  try {
    info = readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8');
  } catch {
    // The directory listing's own descriptor, already closed.
    return false;
  }
  const flags = /^flags:\s*([0-7]+)$/m.exec(info)?.[1];
  return flags !== undefined && (parseInt(flags, 8) & O_CLOEXEC) === 0;
}
