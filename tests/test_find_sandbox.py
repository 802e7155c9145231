"""The sandbox for submitted code: good code runs; code that reads files, opens sockets, runs
forever, sleeps, prints too much, eats memory or starts processes is stopped with a reason."""

from __future__ import annotations

import pytest

from cbench.find.sandbox import Limits, guarantees, run_submissions

LIMITS = Limits(wall_s=3.0, cpu_s=2, memory_mb=512, print_bytes=4096)

CASES = {
    "good": ("def f(x):\n    return 2 * x + 1\n", None),
    "numpy": ("import numpy as np\n\ndef f(x):\n    return float(np.abs(x))\n", None),
    "read_file": ("def f(x):\n    return float(len(open('/etc/hostname').read()))\n", "tried to open a file"),
    "read_file_caught": ("def f(x):\n    try:\n        open('/etc/hostname')\n    except Exception:\n        pass\n"
                         "    return x\n", "tried to open a file"),
    "numpy_fromfile": ("import numpy as np\n\ndef f(x):\n    return float(np.fromfile('/etc/hostname', dtype=np.uint8)[0])\n",
                       "tried to open a file"),
    "list_dir": ("import os\n\ndef f(x):\n    return float(len(os.listdir('/')))\n", "tried to list a directory"),
    "socket": ("import socket\n\ndef f(x):\n    socket.create_connection(('127.0.0.1', 80))\n    return x\n",
               "tried to open a socket"),
    "socket_in_f": ("def f(x):\n    import _socket\n    return x\n", "tried to open a socket"),
    "spin_forever": ("def f(x):\n    while True:\n        pass\n", ("CPU time", "ran longer than")),
    "sleep_forever": ("import time\n\ndef f(x):\n    time.sleep(1000)\n", "ran longer than"),
    "print_flood": ("def f(x):\n    print('y' * 100000)\n    return x\n", "printed more than"),
    "memory": ("def f(x):\n    b = bytearray(8 * 1024 ** 3)\n    return x\n", "out of memory"),
    "fork": ("import os\n\ndef f(x):\n    os.fork()\n    return x\n", "tried to start a process"),
    "system": ("import os\n\ndef f(x):\n    os.system('true')\n    return x\n", "tried to start a process"),
    "syntax": ("def f(x) return x\n", "does not compile"),
    "no_function": ("y = 1\n", "defines no function"),
}


@pytest.fixture(scope="module")
def outcomes():
    entries = [{"key": k, "kind": "numeric", "code": code} for k, (code, _) in CASES.items()]
    return run_submissions(entries, [0.0, 1.5, -2.0], LIMITS)


@pytest.mark.parametrize("name", list(CASES))
def test_each_submission_is_run_or_stopped_with_its_reason(outcomes, name):
    out = outcomes[name]
    expected = CASES[name][1]
    if expected is None:
        assert out.ok and out.reason is None
    else:
        expected = expected if isinstance(expected, tuple) else (expected,)
        assert not out.ok and any(e in out.reason for e in expected), out.reason


def test_a_busy_loop_is_stopped_by_the_cpu_limit_when_the_wall_clock_allows():
    out = run_submissions([{"key": "spin", "kind": "numeric", "code": CASES["spin_forever"][0]}], [0.0],
                          Limits(wall_s=60.0, cpu_s=1))["spin"]
    assert not out.ok and out.reason == "used more than 1 s of CPU time (stopped)"


def test_good_code_gives_its_outputs(outcomes):
    assert outcomes["good"].outputs == [1.0, 4.0, -3.0]
    assert outcomes["numpy"].outputs == [0.0, 1.5, 2.0]


def test_the_kernel_refuses_new_file_descriptors_even_without_the_audit_hook():
    # os.dup and os.pipe raise no audit event: RLIMIT_NOFILE alone must stop them (EMFILE = 24)
    code = ("import os\n\ndef f(x):\n    try:\n        os.dup(0)\n        return 1.0\n"
            "    except OSError as e:\n        return -float(e.errno)\n")
    out = run_submissions([{"key": "dup", "kind": "numeric", "code": code}], [0.0], LIMITS)["dup"]
    assert out.ok and out.outputs == [-24.0]


def test_no_network_namespace_or_socket_refusal_is_reported():
    g = guarantees()
    assert "network" in g and ("namespace" in g["network"] or "socket" in g["network"])


def test_string_entries_and_per_input_errors():
    code = "def f(x):\n    if x == 'boom':\n        raise ValueError\n    return x[::-1]\n"
    out = run_submissions([{"key": "s", "kind": "strings", "code": code, "inputs": ["abc", "boom", "xy"]}],
                          [], LIMITS)["s"]
    assert out.ok and out.outputs == ["cba", None, "yx"] and out.errors == 1


def test_the_sandbox_sees_no_environment_or_working_directory():
    code = ("import os\n\nENV = sorted(os.environ)\nCWD = os.getcwd()\n\n"
            "def f(x):\n    return float(len(ENV) * 1000 + ('cbench-find-sandbox' in CWD))\n")
    out = run_submissions([{"key": "e", "kind": "numeric", "code": code}], [0.0], LIMITS)["e"]
    assert out.ok and out.outputs[0] % 1000 == 1  # an empty temporary working directory
    assert out.outputs[0] // 1000 <= 8  # only the few variables the sandbox sets


def test_an_entry_that_kills_itself_fails_alone_and_the_others_still_run():
    code = ("import signal\n\ndef f(x):\n    signal.raise_signal(signal.SIGKILL)\n    return x\n")
    entries = [{"key": "before", "kind": "numeric", "code": "def f(x):\n    return x\n"},
               {"key": "killer", "kind": "numeric", "code": code},
               {"key": "after", "kind": "numeric", "code": "def f(x):\n    return -x\n"}]
    out = run_submissions(entries, [1.0], LIMITS)
    assert out["before"].ok and out["after"].ok and out["after"].outputs == [-1.0]
    assert not out["killer"].ok and out["killer"].reason == "crashed with signal SIGKILL"


def test_killing_the_supervisor_is_refused():
    code = "import os\n\ndef f(x):\n    os.kill(os.getppid(), 9)\n    return x\n"
    out = run_submissions([{"key": "k", "kind": "numeric", "code": code}], [1.0], LIMITS)["k"]
    assert not out.ok and "tried to send a signal" in out.reason


def test_ignoring_sigxcpu_does_not_escape_the_cpu_limit():
    code = ("import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\n\n"
            "def f(x):\n    while True:\n        pass\n")
    out = run_submissions([{"key": "spin", "kind": "numeric", "code": code}], [0.0],
                          Limits(wall_s=60.0, cpu_s=1))["spin"]
    assert not out.ok and out.reason == "used more than 1 s of CPU time (stopped)"
