"""What the runner relies on of torch.distributed and torchrun, which the pods of every kind launch: their
controllers differ only in how they configure it (the kinds' modules).
"""

from __future__ import annotations

import re

# torchrun reads each flag's default from PET_<FLAG> (torch.distributed.argparse_util.env): this one is
# --rdzv-conf, where c10d's `is_host` says whether this agent serves the rendezvous store.
RDZV_CONF_ENV = "PET_RDZV_CONF"
# Variables of the launching shell that torch.distributed or torchrun would read in a pod.
DISTRIBUTED_ENV = re.compile(
    r"^(PET_.*|TORCHELASTIC_.*|MASTER_ADDR|MASTER_PORT|WORLD_SIZE|RANK|LOCAL_RANK|LOCAL_WORLD_SIZE|GROUP_RANK|"
    r"ROLE_RANK|ROLE_WORLD_SIZE|GROUP_WORLD_SIZE|NODE_RANK)$"
)


def pin_store_host(env: dict[str, str], is_host: bool) -> tuple[str, str]:
    """(RDZV_CONF_ENV, its value in `env` with is_host set), the rest of the conf kept. A --rdzv-conf in
    the command would override it."""
    conf = [part for part in env.get(RDZV_CONF_ENV, "").split(",") if part and not part.startswith("is_host=")]
    conf.append(f"is_host={'true' if is_host else 'false'}")
    return RDZV_CONF_ENV, ",".join(conf)
