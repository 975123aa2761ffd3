"""The real embedder loads offline from its directory without changing the process: no environment variable set,
no socket opened, torch's threads and the hub's progress bars left as they were (the rest:
tests/fast/test_side_effects.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import clean_env


@pytest.mark.embedder
def test_the_embedder_loads_offline_without_changing_the_process():
    """The real embedder, in a clean process with no offline switch: it loads and embeds, opens no
    socket, and leaves the environment, torch's threads and the hub's progress bars as they were."""
    code = (
        "import json, os, sys\n"
        "sockets = []\n"
        "def hook(event, args):\n"
        "    if event in ('socket.connect', 'socket.getaddrinfo'):\n"
        "        sockets.append(event)\n"
        "        raise OSError('no network in this test')\n"
        "sys.addaudithook(hook)\n"
        "import torch\n"
        "import sentence_transformers  # importing it sets torch's KMP_* variables: not localpager's doing\n"
        "from transformers.utils import logging as hf_logging\n"
        "threads, bars = torch.get_num_threads(), hf_logging.is_progress_bar_enabled()\n"
        "before = dict(os.environ)\n"
        "from localpager.retrieval.embedder import Embedder\n"
        "vectors = Embedder().encode(['peanut allergy', 'EpiPen'])\n"
        "print(json.dumps({'shape': list(vectors.shape), 'sockets': sockets, 'env': dict(os.environ) == before,\n"
        "                  'threads': torch.get_num_threads() == threads,\n"
        "                  'bars': hf_logging.is_progress_bar_enabled() == bars}))\n"
    )
    env = {k: v for k, v in clean_env().items() if k != "LOCALPAGER_EMBEDDER"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"shape": [2, 384], "sockets": [], "env": True, "threads": True, "bars": True}
