"""quietus.AsyncClient: the asyncio client of `quietus serve`."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import List

import pytest

import quietus
from conftest import wait_until_gone
from test_client import check_order


def test_fifty_concurrent_processes(marker: str) -> None:
    async def one(client: quietus.AsyncClient, n: int) -> bytes:
        code = (
            "import sys, time; print('n=%s' % sys.argv[1], flush=True); time.sleep(0.3)"
            f"  # {marker}"
        )
        process = await client.start([sys.executable, "-c", code, str(n)], idle_timeout=60)
        events: List[quietus.Event] = [e async for e in process.events(timeout=60)]
        result = await process.wait()
        assert result is not None and result.exit_code == 0
        return check_order(events, process.process_id).get("stdout", b"")

    async def main() -> List[bytes]:
        async with quietus.AsyncClient() as client:
            return await asyncio.gather(*(one(client, n) for n in range(50)))

    outputs = asyncio.run(main())
    assert outputs == [f"n={n}\n".encode() for n in range(50)]
    wait_until_gone(marker)


def test_every_method_and_typed_errors() -> None:
    async def main() -> None:
        async with quietus.AsyncClient(max_processes=2) as client:
            assert client.server_info is not None and client.server_info.name == "quietus"
            cat = await client.start(["cat"], stdin=True, process_id="cat")
            await cat.write(b"abc\n")
            await cat.close_stdin()
            result = await cat.wait()
            assert result is not None and result.exit_code == 0
            assert (await cat.snapshot()).stdout == b"abc\n"
            sleeper = await client.start(["sleep", "60"], idle_timeout=60)
            assert await sleeper.keepalive() is True
            assert await sleeper.set_idle_timeout(30) is True
            assert await sleeper.wait(timeout=0.1) is None
            with pytest.raises(quietus.ProcessIdTaken):
                await client.start(["true"], process_id="cat")
            other = await client.start(["sleep", "60"], idle_timeout=60)
            with pytest.raises(quietus.TooManyProcesses):
                await client.start(["sleep", "60"])
            assert await other.terminate(force=True) is True
            with pytest.raises(quietus.Unsupported):
                await sleeper.resize(10, 10)
            assert await sleeper.kill() is True
            assert (await sleeper.wait()) is not None
            assert await sleeper.interrupt() is False
            assert await sleeper.terminate() is False
            with pytest.raises(quietus.SpawnFailed) as caught:
                await client.start(["no-such-program-xyz"])
            assert caught.value.kind == "not_found"
            names = {p.process_id for p in await client.list()}
            assert "cat" in names
        with pytest.raises(quietus.ClientClosed):
            await client.list()

    asyncio.run(main())


def test_leaving_the_block_ends_every_process(marker: str) -> None:
    async def main() -> None:
        async with quietus.AsyncClient(shutdown_grace=1) as client:
            for _ in range(3):
                await client.start(
                    [sys.executable, "-c", f"import time; time.sleep(300)  # {marker}"]
                )

    asyncio.run(main())
    wait_until_gone(marker)


def test_a_missing_binary_is_a_clear_error() -> None:
    with pytest.raises(quietus.QuietusNotFound) as caught:
        quietus.AsyncClient(quietus_bin="/nonexistent/quietus")
    assert "/nonexistent/quietus" in str(caught.value)


def test_a_dead_server_fails_the_calls_waiting_on_it() -> None:
    async def main() -> None:
        client = await quietus.AsyncClient().open()
        process = await client.start(["sleep", "60"])
        waiting = asyncio.ensure_future(process.wait())
        await asyncio.sleep(0.2)  # the wait is sent (nothing asserts on time)
        os.kill(client.server_pid, signal.SIGKILL)  # the server this test started
        with pytest.raises(quietus.ServerDied):
            await asyncio.wait_for(waiting, 30)
        with pytest.raises(quietus.ServerDied):
            await client.list()
        await client.close()

    asyncio.run(main())


def test_a_client_never_closed_leaves_nothing_when_its_loop_ends(marker: str) -> None:
    async def main() -> None:
        client = await quietus.AsyncClient(shutdown_grace=1).open()
        for _ in range(3):
            await client.start([sys.executable, "-c", f"import time; time.sleep(300)  # {marker}"])

    asyncio.run(main())  # the loop closes the server's pipes: it ends every process
    wait_until_gone(marker)
