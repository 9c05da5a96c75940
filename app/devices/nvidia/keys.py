"""NVIDIA annotation keys and reason names, byte-for-byte HAMi's (reference §2.1, §3.3, §4.7, §4.10)."""

from app.core import mig

VENDOR = "NVIDIA"

REGISTER = "hami.io/node-nvidia-register"
PAIR_SCORE = "hami.io/node-nvidia-score"
HANDSHAKE = "hami.io/node-handshake"
CORDON = "hami.io/device-cordon"
TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
ALLOCATED = "hami.io/vgpu-devices-allocated"
MIG_ALLOCATIONS = mig.ANNOTATION  # read vendor-independently by the usage bookkeeping

USE_TYPE = "nvidia.com/use-gputype"
NOUSE_TYPE = "nvidia.com/nouse-gputype"
USE_UUID = "nvidia.com/use-gpuuuid"
NOUSE_UUID = "nvidia.com/nouse-gpuuuid"
VGPU_MODE = "nvidia.com/vgpu-mode"

MIG_MODE = mig.MIG_MODE
HAMI_CORE_MODE = "hami-core"

# Environment variables the webhook injects (HAMi util.TaskPriority / util.CoreLimitSwitch).
TASK_PRIORITY_ENV = "CUDA_TASK_PRIORITY"
CORE_POLICY_ENV = "GPU_CORE_UTILIZATION_POLICY"
