/**
 * The seccomp filter every sandboxed process runs under: a classic-BPF program that bubblewrap loads
 * with `--seccomp FD` right before it starts the command (after it built the namespaces, so its own
 * set-up is not filtered). The filter is inherited by every process the command starts and cannot be
 * removed or loosened from inside.
 *
 * What it decides, for each system call:
 * - another ABI than the worker's own (32-bit `int 0x80` on x86-64, for instance): the process is
 *   killed, since the numbers below would mean other calls there;
 * - an x32 call (x86-64 numbers with bit 30 set): EPERM;
 * - a call in `REFUSED_SYSCALLS`: EPERM;
 * - `ioctl` with `TIOCSTI` or `TIOCLINUX` (typing into, or reading, a terminal): EPERM;
 * - `clone` or `unshare` asking for a new user namespace (`CLONE_NEWUSER`), in which the command would
 *   get back every capability the sandbox dropped: EPERM;
 * - `personality` turning off address-space randomisation (or the other legacy layout flags): EPERM;
 * - `clone3`: ENOSYS, so the C library falls back to `clone`, whose flags the filter can read;
 * - anything else: allowed.
 *
 * Arguments are compared on their low 32 bits, which is what the kernel itself reads for `ioctl`'s
 * request and the flags of `clone`, `unshare` and `personality`: a value with junk in its high half
 * cannot slip past.
 */
import { REFUSED_SYSCALLS, syscallTable, type SyscallTable } from './seccomp-syscalls';

/** Classic-BPF opcodes (linux/filter.h): load a word of `seccomp_data`, compare, return. */
export const BPF_LD_W_ABS = 0x20;
export const BPF_JMP_JEQ_K = 0x15;
export const BPF_JMP_JSET_K = 0x45;
export const BPF_RET_K = 0x06;

/** Where the fields of `struct seccomp_data` are: `nr`, `arch`, then six 64-bit `args`. */
export const SECCOMP_DATA_NR = 0;
export const SECCOMP_DATA_ARCH = 4;
const SECCOMP_DATA_ARGS = 16;
/** The low half of argument `index` (both supported ABIs are little-endian). */
export const argumentLowWord = (index: number): number => SECCOMP_DATA_ARGS + 8 * index;

/** Filter return values (linux/seccomp.h): the low 16 bits of `ERRNO` carry the errno. */
export const SECCOMP_RET_KILL_PROCESS = 0x80000000;
export const SECCOMP_RET_ERRNO = 0x00050000;
export const SECCOMP_RET_ALLOW = 0x7fff0000;
export const EPERM = 1;
export const ENOSYS = 38;

export const TIOCSTI = 0x5412;
export const TIOCLINUX = 0x541c;
export const CLONE_NEWUSER = 0x10000000;
/** `personality(0xffffffff)` only reads the current persona; libc and `setarch` use it. */
const PERSONALITY_QUERY = 0xffffffff;
/** ADDR_NO_RANDOMIZE | MMAP_PAGE_ZERO | ADDR_COMPAT_LAYOUT | READ_IMPLIES_EXEC: each weakens memory layout defences. */
export const PERSONALITY_LAYOUT_FLAGS = 0x0040000 | 0x0100000 | 0x0200000 | 0x0400000;

/** Bytes of one `struct sock_filter`: u16 code, u8 jt, u8 jf, u32 k. */
const INSTRUCTION_BYTES = 8;
/** A classic-BPF jump offset is one byte. */
const MAX_JUMP = 255;

type Label = 'deny' | 'enosys' | 'kill' | 'allow' | 'ioctl' | 'newUser' | 'personality';
interface Instruction {
  code: number;
  k: number;
  /** Where a conditional jump goes when true / false: a label, or the next instruction. */
  jt?: Label;
  jf?: Label;
}

const load = (offset: number): Instruction => ({ code: BPF_LD_W_ABS, k: offset });
const ret = (value: number): Instruction => ({ code: BPF_RET_K, k: value });
const jumpIfEqual = (k: number, jt?: Label, jf?: Label): Instruction => ({ code: BPF_JMP_JEQ_K, k, jt, jf });
const jumpIfAnyBit = (k: number, jt?: Label, jf?: Label): Instruction => ({ code: BPF_JMP_JSET_K, k, jt, jf });

/** The filter's instructions for one architecture, in order, with labels still symbolic. */
function program(table: SyscallTable): Array<Instruction | Label> {
  const nr = table.numbers;
  return [
    load(SECCOMP_DATA_ARCH),
    jumpIfEqual(table.auditArch, undefined, 'kill'),
    load(SECCOMP_DATA_NR),
    ...(table.x32Bit ? [jumpIfAnyBit(table.x32Bit, 'deny')] : []),
    ...REFUSED_SYSCALLS.map((name) => jumpIfEqual(nr[name], 'deny')),
    jumpIfEqual(nr.ioctl, 'ioctl'),
    jumpIfEqual(nr.clone, 'newUser'),
    jumpIfEqual(nr.unshare, 'newUser'),
    jumpIfEqual(nr.personality, 'personality'),
    jumpIfEqual(nr.clone3, 'enosys'),
    ret(SECCOMP_RET_ALLOW),
    'ioctl',
    load(argumentLowWord(1)),
    jumpIfEqual(TIOCSTI, 'deny'),
    jumpIfEqual(TIOCLINUX, 'deny', 'allow'),
    'newUser',
    load(argumentLowWord(0)),
    jumpIfAnyBit(CLONE_NEWUSER, 'deny', 'allow'),
    'personality',
    load(argumentLowWord(0)),
    jumpIfEqual(PERSONALITY_QUERY, 'allow'),
    jumpIfAnyBit(PERSONALITY_LAYOUT_FLAGS, 'deny', 'allow'),
    // Classic BPF jumps only forward, so every outcome sits at the end.
    'allow',
    ret(SECCOMP_RET_ALLOW),
    'deny',
    ret(SECCOMP_RET_ERRNO | EPERM),
    'enosys',
    ret(SECCOMP_RET_ERRNO | ENOSYS),
    'kill',
    ret(SECCOMP_RET_KILL_PROCESS),
  ];
}

/** Resolves labels into forward jump offsets and encodes `struct sock_filter[]` little-endian, the byte order of both covered architectures. */
function assemble(items: Array<Instruction | Label>): Buffer {
  const instructions: Instruction[] = [];
  const at = new Map<Label, number>();
  for (const item of items) {
    if (typeof item === 'string') at.set(item, instructions.length);
    else instructions.push(item);
  }
  const buffer = Buffer.alloc(instructions.length * INSTRUCTION_BYTES);
  instructions.forEach((instruction, index) => {
    const offset = (label: Label | undefined): number => {
      if (label === undefined) return 0;
      const distance = at.get(label)! - index - 1;
      if (distance < 0 || distance > MAX_JUMP) throw new Error(`seccomp filter: jump to ${label} out of range`);
      return distance;
    };
    const position = index * INSTRUCTION_BYTES;
    buffer.writeUInt16LE(instruction.code, position);
    buffer.writeUInt8(offset(instruction.jt), position + 2);
    buffer.writeUInt8(offset(instruction.jf), position + 3);
    buffer.writeUInt32LE(instruction.k >>> 0, position + 4);
  });
  return buffer;
}

/**
 * The compiled filter for a Node `process.arch`, ready for `bwrap --seccomp FD`, or undefined when the
 * architecture is not covered (the sandbox then refuses to run tools rather than run them unfiltered).
 */
export function seccompFilter(arch: string = process.arch): Buffer | undefined {
  const table = syscallTable(arch);
  return table ? assemble(program(table)) : undefined;
}
