"""nnconform.isolation.childproc: spawning, limits, stderr tails, killing and classifying child processes.

Each test starts a small child program (written to tmp_path) through ``childproc.Child``, as
the driver host and the stress sandbox start theirs, and checks what the layer says about it.
Time bounds are generous: the CI machine has two busy cores."""

import os
import select
import signal
import textwrap
import time

import pytest

from nnconform.isolation import childproc

STARTUP_S = 120.0  # a busy machine may take long to start an interpreter

CHILD = textwrap.dedent("""
    import argparse, os, resource, signal, subprocess, sys, time
    from nnconform.isolation import childproc

    p = childproc.child_arguments(argparse.ArgumentParser())
    p.add_argument("--act", required=True)
    a = p.parse_args()
    childproc.child_setup(a.mem_limit)

    def say(text):
        os.write(a.res_fd, (text + "\\n").encode())

    say("ready %d" % resource.getrlimit(resource.RLIMIT_AS)[0])
    if a.act == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif a.act == "exit3":
        sys.exit(3)
    elif a.act == "hang":
        sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
        in_group = subprocess.Popen(sleeper)
        own_session = subprocess.Popen(sleeper, start_new_session=True)
        say("kids %d %d" % (in_group.pid, own_session.pid))
        time.sleep(600)
    elif a.act == "alloc":
        hog = bytearray(1 << 30)      # past a 512 MiB RLIMIT_AS: MemoryError, uncaught
        say("allocated %d" % len(hog))
    elif a.act == "spew":
        for i in range(5000):
            print("line %d" % i, file=sys.stderr)
        sys.stderr.flush()
        say("done")
        time.sleep(600)
""")

WORDING = {"who": "child", "unfinished": "without an answer"}


@pytest.fixture
def spawn(tmp_path):
    (tmp_path / "cp_child.py").write_text(CHILD)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    children = []

    def start(act: str, mem_limit: int = 0) -> childproc.Child:
        c = childproc.Child(
            "cp_child",
            ["--act", act],
            token_var="NNCONFORM_TEST_CHILD",
            mem_limit=mem_limit,
            env=env,
            stderr_dir=str(tmp_path),
            stderr_prefix="cp-",
        )
        children.append(c)
        return c

    yield start
    for c in children:  # a failed test must not leave its child running
        if c.poll() is None:  # (a reaped child's pid may already belong to someone else)
            c.kill()
        c.close_fds()
        c.stderr.remove()


def _line(c: childproc.Child, timeout: float, buf: list) -> str | None:
    """The next line from the child's result pipe; None at EOF; TimeoutError past the bound.
    ``buf`` keeps what was read past the line."""
    data = buf.pop() if buf else b""
    deadline = time.monotonic() + timeout
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([c.res_fd], [], [], left)[0]:
            buf.append(data)
            raise TimeoutError
        chunk = os.read(c.res_fd, 4096)
        if not chunk:
            return None
        data += chunk
    line, _, rest = data.partition(b"\n")
    buf.append(rest)
    return line.decode()


def _ended(c: childproc.Child, buf: list) -> childproc.Ending:
    """Wait for EOF on the result pipe (the child died), then classify as the harness does."""
    assert _line(c, STARTUP_S, buf) is None
    end = childproc.classify(c.wait_exit(30), False, **WORDING)
    c.kill()
    return end


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0] != "Z"  # a zombie is dead for our purposes
    except (OSError, IndexError):
        return False


def test_a_segfault_is_a_crash_named_by_its_signal_with_the_stack_in_the_tail(spawn):
    c, buf = spawn("segv"), []
    assert _line(c, STARTUP_S, buf).startswith("ready")
    end = _ended(c, buf)
    assert end.verdict == childproc.CRASH and end.signal == signal.SIGSEGV and end.exit_code is None
    assert end.reason == "child killed by SIGSEGV" and end.details() == {"signal": signal.SIGSEGV}
    tail = c.stderr.tail()
    assert "Segmentation fault" in tail and "cp_child.py" in tail  # faulthandler's dump
    dump = c.stderr.fault_dump()
    assert dump == c.stderr.tail(lines=4000, chars=64_000)  # a short dump is the plain tail
    assert childproc.fault_blocks(dump)[0][0][0].endswith("cp_child.py")


def test_an_exit_is_a_crash_with_its_code(spawn):
    c, buf = spawn("exit3"), []
    assert _line(c, STARTUP_S, buf).startswith("ready")
    end = _ended(c, buf)
    assert end.verdict == childproc.CRASH and end.exit_code == 3 and end.signal is None
    assert end.reason == "child exited with code 3 without an answer" and end.details() == {"exit_code": 3}
    assert c.exit_text() == "exit code 3"


def test_a_hang_is_killed_with_its_whole_group_and_the_grandchildren_that_left_it(spawn):
    c, buf = spawn("hang"), []
    assert _line(c, STARTUP_S, buf).startswith("ready")
    kids = [int(p) for p in _line(c, STARTUP_S, buf).split()[1:]]
    assert len(kids) == 2 and all(_alive(p) for p in kids)
    with pytest.raises(TimeoutError):
        _line(c, 1.0, buf)  # the bound: no answer within it
    c.dump_stacks()
    escaped = c.kill()
    end = childproc.classify(c.returncode, True, hang_reason="no answer within 1 s", **WORDING)
    assert end.verdict == childproc.HANG and end.signal is None and end.exit_code is None
    assert end.reason == "no answer within 1 s; child stacks dumped and its process group killed"
    assert c.poll() is not None
    assert not any(_alive(p) for p in [c.pid, *kids])
    # the grandchild that started its own session is named as having left the group
    assert len(escaped) == 1 and f"pid {kids[1]} " in escaped[0]
    assert "cp_child.py" in c.stderr.tail()  # the SIGUSR1 stack dump, taken before the kill


def test_the_memory_limit_holds_in_the_child(spawn):
    limit = 512 << 20
    c, buf = spawn("alloc", mem_limit=limit), []
    assert _line(c, STARTUP_S, buf) == f"ready {limit}"
    end = _ended(c, buf)  # the allocation failed: no "allocated" line
    assert end.verdict == childproc.CRASH and end.exit_code == 1
    assert "MemoryError" in c.stderr.tail()


def test_the_stderr_tail_is_bounded_and_keeps_the_last_lines(spawn):
    c, buf = spawn("spew"), []
    assert _line(c, STARTUP_S, buf).startswith("ready")
    assert _line(c, STARTUP_S, buf) == "done"
    tail = c.stderr.tail(lines=40)
    assert tail.splitlines() == [f"line {i}" for i in range(4960, 5000)]
    assert c.stderr.tail(lines=40, chars=100) == tail[-100:] and len(tail[-100:]) == 100
    # from an offset: only what was written since
    assert c.stderr.tail(offset=c.stderr.size()) == ""


def test_a_long_fault_dump_keeps_the_crashing_thread_first(tmp_path):
    err = childproc.StderrFile(str(tmp_path))
    threads = [
        f"Thread 0x{i:04x} (most recent call first):\n"
        + "".join(f'  File "/x/pool{i}.py", line {j} in wait\n' for j in range(50))
        for i in range(40)
    ]
    crashing = 'Current thread 0x0abc (most recent call first):\n  File "/drv/kernel.py", line 7 in launch\n'
    dump = "Fatal Python error: Segmentation fault\n\n" + "\n".join(threads[:3] + [crashing] + threads[3:])
    with open(err.path, "w") as f:
        f.write(dump + "\nExtension modules: numpy (total: 1)\n")
    assert "Current thread" not in err.tail(chars=8000)  # a plain tail of 8000 loses it
    kept = err.fault_dump(chars=8000)
    assert len(kept) <= 8000 and kept.endswith("(total: 1)")
    blocks = childproc.fault_blocks(kept)
    assert blocks[0] == [("/drv/kernel.py", "launch")]
    err.remove()
    assert not os.path.exists(err.path)


def test_signal_and_exit_names():
    assert childproc.signal_name(signal.SIGSEGV) == "SIGSEGV"
    assert childproc.signal_name(99) == "signal 99"
    assert childproc.signal_name(None) == "signal None"
    assert childproc.exit_text(None) == "still running"
    assert childproc.exit_text(-signal.SIGKILL) == "killed by SIGKILL"
    assert childproc.exit_text(2) == "exit code 2"
    assert (
        childproc.classify(None, False, **WORDING).reason
        == "child closed its result pipe without an answer and did not exit"
    )
