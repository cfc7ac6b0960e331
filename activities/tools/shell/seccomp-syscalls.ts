/**
 * The system calls the sandbox's seccomp filter (`seccomp-filter.ts`) refuses, by number for each
 * architecture it supports. Numbers are the kernel's ABI and never change; they come from
 * `asm/unistd_64.h` (x86-64) and `asm-generic/unistd.h` (aarch64), and a unit test compares them with
 * those headers where the machine has them.
 */

/** `AUDIT_ARCH_*` (linux/audit.h): what `seccomp_data.arch` holds for a system call of this ABI. */
export const AUDIT_ARCH_X86_64 = 0xc000003e;
export const AUDIT_ARCH_AARCH64 = 0xc00000b7;

/**
 * System calls no tool needs, refused outright with EPERM:
 * - `ptrace`, `process_vm_readv/writev`: reading or steering another process of the sandbox;
 * - the key-retention service: kernel keyrings are not namespaced, so keys could outlive the command;
 * - `userfaultfd`, `io_uring_*`, `bpf`, `perf_event_open`: the kernel's largest recent attack surfaces;
 * - mounting, module loading, `kexec`, `setns`: kernel and namespace configuration;
 * - `open_by_handle_at`, `name_to_handle_at`: opening files by handle bypasses the mount namespace.
 */
export const REFUSED_SYSCALLS = [
  'ptrace',
  'process_vm_readv',
  'process_vm_writev',
  'add_key',
  'request_key',
  'keyctl',
  'userfaultfd',
  'io_uring_setup',
  'io_uring_enter',
  'io_uring_register',
  'bpf',
  'perf_event_open',
  'mount',
  'umount2',
  'pivot_root',
  'open_tree',
  'move_mount',
  'fsopen',
  'fsconfig',
  'fsmount',
  'fspick',
  'mount_setattr',
  'kexec_load',
  'kexec_file_load',
  'init_module',
  'finit_module',
  'delete_module',
  'setns',
  'open_by_handle_at',
  'name_to_handle_at',
] as const;

/** System calls allowed or refused by their arguments (see `seccomp-filter.ts`). */
export const ARGUMENT_CHECKED_SYSCALLS = ['ioctl', 'clone', 'unshare', 'personality'] as const;

/** `clone3` passes its flags in memory, which a filter cannot read: it gets ENOSYS, so libc falls back to `clone`. */
export const FALLBACK_SYSCALLS = ['clone3'] as const;

export type FilteredSyscall =
  (typeof REFUSED_SYSCALLS)[number] | (typeof ARGUMENT_CHECKED_SYSCALLS)[number] | (typeof FALLBACK_SYSCALLS)[number];

export interface SyscallTable {
  /** The `AUDIT_ARCH_*` value a system call of this ABI carries; any other ABI is killed. */
  auditArch: number;
  /**
   * Set in the number of a system call made through x86-64's x32 ABI, which the kernel serves with
   * the same code: refused as a whole so no filtered call can be reached through its x32 alias.
   */
  x32Bit?: number;
  numbers: Readonly<Record<FilteredSyscall, number>>;
}

const X86_64: SyscallTable = {
  auditArch: AUDIT_ARCH_X86_64,
  x32Bit: 0x40000000,
  numbers: {
    ioctl: 16,
    clone: 56,
    ptrace: 101,
    personality: 135,
    pivot_root: 155,
    mount: 165,
    umount2: 166,
    init_module: 175,
    delete_module: 176,
    kexec_load: 246,
    add_key: 248,
    request_key: 249,
    keyctl: 250,
    unshare: 272,
    perf_event_open: 298,
    name_to_handle_at: 303,
    open_by_handle_at: 304,
    setns: 308,
    process_vm_readv: 310,
    process_vm_writev: 311,
    finit_module: 313,
    kexec_file_load: 320,
    bpf: 321,
    userfaultfd: 323,
    io_uring_setup: 425,
    io_uring_enter: 426,
    io_uring_register: 427,
    open_tree: 428,
    move_mount: 429,
    fsopen: 430,
    fsconfig: 431,
    fsmount: 432,
    fspick: 433,
    clone3: 435,
    mount_setattr: 442,
  },
};

const AARCH64: SyscallTable = {
  auditArch: AUDIT_ARCH_AARCH64,
  numbers: {
    ioctl: 29,
    umount2: 39,
    mount: 40,
    pivot_root: 41,
    personality: 92,
    unshare: 97,
    kexec_load: 104,
    init_module: 105,
    delete_module: 106,
    ptrace: 117,
    add_key: 217,
    request_key: 218,
    keyctl: 219,
    clone: 220,
    perf_event_open: 241,
    name_to_handle_at: 264,
    open_by_handle_at: 265,
    setns: 268,
    process_vm_readv: 270,
    process_vm_writev: 271,
    finit_module: 273,
    bpf: 280,
    userfaultfd: 282,
    kexec_file_load: 294,
    io_uring_setup: 425,
    io_uring_enter: 426,
    io_uring_register: 427,
    open_tree: 428,
    move_mount: 429,
    fsopen: 430,
    fsconfig: 431,
    fsmount: 432,
    fspick: 433,
    clone3: 435,
    mount_setattr: 442,
  },
};

/** The table for a Node `process.arch`, or undefined for an architecture the filter does not cover. */
export function syscallTable(arch: string): SyscallTable | undefined {
  if (arch === 'x64') return X86_64;
  if (arch === 'arm64') return AARCH64;
  return undefined;
}
