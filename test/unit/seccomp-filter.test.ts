/**
 * The seccomp filter's program, run by a small classic-BPF interpreter over `seccomp_data` built here:
 * every refused call is refused on both architectures, argument checks read the low 32 bits the kernel
 * reads, other ABIs are killed, and ordinary calls are allowed. The system call numbers are compared
 * with the kernel headers where the machine has them.
 */
import { existsSync, readFileSync } from 'node:fs';
import {
  BPF_JMP_JEQ_K,
  BPF_JMP_JSET_K,
  BPF_LD_W_ABS,
  BPF_RET_K,
  CLONE_NEWUSER,
  ENOSYS,
  EPERM,
  PERSONALITY_LAYOUT_FLAGS,
  SECCOMP_RET_ALLOW,
  SECCOMP_RET_ERRNO,
  SECCOMP_RET_KILL_PROCESS,
  seccompFilter,
  TIOCLINUX,
  TIOCSTI,
} from '../../activities/tools/shell/seccomp-filter';
import {
  ARGUMENT_CHECKED_SYSCALLS,
  FALLBACK_SYSCALLS,
  REFUSED_SYSCALLS,
  syscallTable,
  type FilteredSyscall,
} from '../../activities/tools/shell/seccomp-syscalls';

const DENY = SECCOMP_RET_ERRNO | EPERM;
const NO_SUCH_CALL = SECCOMP_RET_ERRNO | ENOSYS;

interface Call {
  nr: number;
  arch: number;
  args?: bigint[];
}

/** `struct seccomp_data`: nr, arch, instruction pointer, six 64-bit arguments (little-endian). */
function seccompData(call: Call): Buffer {
  const data = Buffer.alloc(64);
  data.writeInt32LE(call.nr, 0);
  data.writeUInt32LE(call.arch, 4);
  (call.args ?? []).forEach((arg, i) => data.writeBigUInt64LE(BigInt.asUintN(64, arg), 16 + 8 * i));
  return data;
}

/** Runs the filter as the kernel would, for the four opcodes it uses; anything else fails the test. */
function run(filter: Buffer, call: Call): number {
  const data = seccompData(call);
  let accumulator = 0;
  for (let pc = 0; pc * 8 < filter.length; pc += 1) {
    const code = filter.readUInt16LE(pc * 8);
    const jt = filter.readUInt8(pc * 8 + 2);
    const jf = filter.readUInt8(pc * 8 + 3);
    const k = filter.readUInt32LE(pc * 8 + 4);
    if (code === BPF_LD_W_ABS) accumulator = data.readUInt32LE(k);
    else if (code === BPF_JMP_JEQ_K) pc += accumulator === k ? jt : jf;
    else if (code === BPF_JMP_JSET_K) pc += (accumulator & k) !== 0 ? jt : jf;
    else if (code === BPF_RET_K) return k;
    else throw new Error(`unexpected opcode ${code.toString(16)} at ${pc}`);
  }
  throw new Error('the program ran off its end');
}

describe.each(['x64', 'arm64'])('the seccomp filter on %s', (arch) => {
  const table = syscallTable(arch)!;
  const filter = seccompFilter(arch)!;
  const call = (name: FilteredSyscall, args: bigint[] = []) =>
    run(filter, { nr: table.numbers[name], arch: table.auditArch, args });

  test('is a whole number of instructions, short enough for the kernel (4096 at most)', () => {
    expect(filter.length % 8).toBe(0);
    expect(filter.length / 8).toBeLessThan(100);
  });

  test.each(REFUSED_SYSCALLS)('%s is refused with EPERM, whatever its arguments', (name) => {
    expect(call(name)).toBe(DENY);
    expect(call(name, [1n, 2n, 3n, 4n, 5n, 6n])).toBe(DENY);
  });

  test('ioctl: TIOCSTI and TIOCLINUX are refused, also with junk in the high half; other requests pass', () => {
    expect(call('ioctl', [0n, BigInt(TIOCSTI)])).toBe(DENY);
    expect(call('ioctl', [0n, BigInt(TIOCLINUX)])).toBe(DENY);
    expect(call('ioctl', [0n, (0xdeadbeefn << 32n) | BigInt(TIOCSTI)])).toBe(DENY);
    const TCGETS = 0x5401n;
    const FIONREAD = 0x541bn;
    expect(call('ioctl', [0n, TCGETS])).toBe(SECCOMP_RET_ALLOW);
    expect(call('ioctl', [0n, FIONREAD])).toBe(SECCOMP_RET_ALLOW);
  });

  test('clone and unshare: a new user namespace is refused; threads, forks and other flags pass', () => {
    const SIGCHLD = 17n;
    const THREAD_FLAGS = 0x3d0f00n; // what glibc's pthread_create passes
    expect(call('clone', [BigInt(CLONE_NEWUSER) | SIGCHLD])).toBe(DENY);
    expect(call('unshare', [BigInt(CLONE_NEWUSER)])).toBe(DENY);
    expect(call('clone', [SIGCHLD])).toBe(SECCOMP_RET_ALLOW);
    expect(call('clone', [THREAD_FLAGS])).toBe(SECCOMP_RET_ALLOW);
    expect(call('unshare', [0x400n /* CLONE_FILES */])).toBe(SECCOMP_RET_ALLOW);
  });

  test('clone3 gets ENOSYS, so the C library falls back to clone', () => {
    expect(call('clone3')).toBe(NO_SUCH_CALL);
  });

  test('personality: turning off address randomisation is refused; the query and plain Linux pass', () => {
    const ADDR_NO_RANDOMIZE = 0x0040000n;
    expect(call('personality', [ADDR_NO_RANDOMIZE])).toBe(DENY);
    expect(call('personality', [BigInt(PERSONALITY_LAYOUT_FLAGS)])).toBe(DENY);
    expect(call('personality', [0xffffffffn])).toBe(SECCOMP_RET_ALLOW);
    expect(call('personality', [0n])).toBe(SECCOMP_RET_ALLOW);
  });

  test('ordinary calls pass: every number below 450 that the filter does not name', () => {
    const named = new Set(Object.values(table.numbers));
    for (let nr = 0; nr < 450; nr += 1) {
      if (named.has(nr)) continue;
      expect(run(filter, { nr, arch: table.auditArch })).toBe(SECCOMP_RET_ALLOW);
    }
  });

  test('a call made through another ABI kills the process', () => {
    const AUDIT_ARCH_I386 = 0x40000003;
    const AUDIT_ARCH_ARM = 0x40000028;
    for (const other of [AUDIT_ARCH_I386, AUDIT_ARCH_ARM, arch === 'x64' ? 0xc00000b7 : 0xc000003e]) {
      expect(run(filter, { nr: 39, arch: other })).toBe(SECCOMP_RET_KILL_PROCESS);
    }
  });
});

describe('x86-64 only', () => {
  test('x32 calls (bit 30 set) are refused, so no filtered call is reachable through its x32 alias', () => {
    const table = syscallTable('x64')!;
    const filter = seccompFilter('x64')!;
    const X32_BIT = 0x40000000;
    const GETPID = 39;
    expect(run(filter, { nr: X32_BIT | GETPID, arch: table.auditArch })).toBe(DENY);
    expect(run(filter, { nr: X32_BIT | table.numbers.ptrace, arch: table.auditArch })).toBe(DENY);
  });

  test('an architecture the filter does not cover gets no filter (the sandbox then refuses tools)', () => {
    expect(seccompFilter('ia32')).toBeUndefined();
    expect(syscallTable('riscv64')).toBeUndefined();
  });
});

describe('the numbers are the kernel headers’ numbers', () => {
  const all = [...REFUSED_SYSCALLS, ...ARGUMENT_CHECKED_SYSCALLS, ...FALLBACK_SYSCALLS];
  const headers: Array<[string, string]> = [
    ['x64', '/usr/include/x86_64-linux-gnu/asm/unistd_64.h'],
    ['x64', '/usr/include/asm/unistd_64.h'],
    ['arm64', '/usr/include/asm-generic/unistd.h'],
  ];
  const present = headers.filter(([, file]) => existsSync(file));

  test('at least one header is on this machine (linux-libc-dev)', () => {
    expect(present.length).toBeGreaterThan(0);
  });

  test.each(present)('%s against %s', (arch, file) => {
    const text = readFileSync(file, 'utf8');
    const table = syscallTable(arch)!;
    for (const name of all) {
      const match = new RegExp(`#define __NR(?:3264)?_${name}\\s+(\\d+)`).exec(text);
      expect([name, match ? Number(match[1]) : undefined]).toEqual([name, table.numbers[name]]);
    }
  });
});
