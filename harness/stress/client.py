"""A client process for the multi-process crash tests (MLTS ``nn_stress_test``).

    python -m nnconform.stress.client --driver X --mode infer|compile --duration S --threads N

Loads the driver, prints ``READY``, then runs N threads for S seconds: ``infer`` executes the
workload models and checks the results, ``compile`` prepares and releases them.  Ends with
``DONE <count>`` and exit status 0, or ``FAIL <reason>`` and exit status 1.  Anything else
(a signal, exit 0 without DONE, no end at all) is judged by the test that started it.
"""

from __future__ import annotations

import argparse
import sys
import threading


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="nnconform.stress.client")
    p.add_argument("--driver", required=True)
    p.add_argument("--mode", choices=("infer", "compile"), required=True)
    p.add_argument("--duration", type=float, required=True)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args(argv)

    from nnconform.driver.loader import load_driver
    from nnconform.stress.workload import check, workload

    device = load_driver(a.driver)
    models = workload(device)
    print("READY", flush=True)

    stop = threading.Event()
    errors: list[str] = []
    counts = [0] * a.threads

    def body(k: int) -> None:
        i = k
        try:
            while not stop.is_set():
                ex = models[i % len(models)]
                i += 1
                if a.mode == "infer":
                    why = check(device, ex)
                    if why:
                        errors.append(why)
                        stop.set()
                        return
                else:
                    device.prepare(ex.model).release()
                counts[k] += 1
        except BaseException as e:  # a driver exception (KeyboardInterrupt, SystemExit... too) ends this client
            errors.append(f"thread {k} died of {type(e).__name__}: {e}")
            stop.set()

    threads = [threading.Thread(target=body, args=(k,), daemon=True) for k in range(a.threads)]
    for t in threads:
        t.start()
    stop.wait(a.duration)
    stop.set()
    for t in threads:
        t.join()  # a thread stuck in the driver keeps us here: the test sees a hang
    if errors:
        print(f"FAIL {errors[0]}", flush=True)
        return 1
    print(f"DONE {sum(counts)}", flush=True)
    return 0


if __name__ == "__main__":
    from nnconform.stress.client import main as _main

    sys.exit(_main())
