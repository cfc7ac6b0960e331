# Run inside the sandbox as `python3 -c <this file's text> '[["label", number], …]'`: makes each system
# call through libc's syscall(2), with arguments under which it would succeed, or fail with another
# errno than EPERM, if nothing refused it, and prints {"label": {"result": r, "errno": e}, …} as JSON,
# with the Seccomp lines of /proc/self/status under "status".
import ctypes
import json
import os
import sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

CLONE_NEWUSER = 0x10000000
SIGCHLD = 17
ADDR_NO_RANDOMIZE = 0x0040000
TIOCSTI = 0x5412
TIOCLINUX = 0x541C
KEYCTL_GET_KEYRING_ID = 0
KEY_SPEC_SESSION_KEYRING = -3
PTRACE_TRACEME = 0

scratch = ctypes.create_string_buffer(4096)
scratch_address = ctypes.addressof(scratch)
key_type = ctypes.create_string_buffer(b"user")
key_description = ctypes.create_string_buffer(b"probe")
# The sandbox's session has no terminal; stdin (/dev/null) then answers ENOTTY to a call nothing refused.
TERMINAL = 0

# Arguments per call; anything not listed gets zeros (harmless: the call fails either way).
ARGS = {
    "ptrace": [PTRACE_TRACEME, 0, 0, 0],
    "keyctl": [KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0],
    "add_key": [ctypes.addressof(key_type), ctypes.addressof(key_description), scratch_address, 1, KEY_SPEC_SESSION_KEYRING],
    "io_uring_setup": [1, scratch_address],
    "userfaultfd": [0],
    "unshare": [CLONE_NEWUSER],
    "clone_newuser": [CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0],
    "personality_no_aslr": [ADDR_NO_RANDOMIZE],
    "ioctl_tiocsti": [TERMINAL, TIOCSTI, scratch_address],
    "ioctl_tioclinux": [TERMINAL, TIOCLINUX, scratch_address],
    "clone3": [scratch_address, 88],
}


def call(label, nr):
    args = [ctypes.c_long(a) for a in ARGS.get(label, [0, 0, 0, 0, 0, 0])]
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(nr), *args)
    if result == 0 and label in ("clone_newuser", "clone3"):
        os._exit(0)  # the child of a clone nothing refused
    if result > 0 and label == "clone_newuser":
        os.waitpid(result, 0)
    return {"result": result, "errno": ctypes.get_errno()}


def call_in_child(label, nr):
    """For ptrace(TRACEME): a process that succeeds would stop at its next signal, so a child makes it."""
    readable, writable = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(writable, json.dumps(call(label, nr)).encode())
        os._exit(0)
    os.close(writable)
    answer = os.read(readable, 4096)
    os.waitpid(pid, 0)
    return json.loads(answer)


results = {}
for label, nr in json.loads(sys.argv[1]):
    results[label] = call_in_child(label, nr) if label == "ptrace" else call(label, nr)

with open("/proc/self/status") as status:
    results["status"] = [line.strip() for line in status if line.startswith("Seccomp")]
print(json.dumps(results))
