"""Start-up hook for the ranks of ds_load_check.py, put on PYTHONPATH by realds.py only when a checkpoint was
written with extra ZeRO settings (CKPTDOC_DS_ZERO_EXTRA, a JSON object such as {"sub_group_size": 10000}) or extra
top-level config keys (CKPTDOC_DS_CONFIG_EXTRA, e.g. {"checkpoint": {"checkpoint_serialization": false}}; also for
the ranks of ds_driver.py train, which has no option for them): the engine that loads it must be built with the
same settings, as the user's resumed job would be, and ds_load_check.py has no option for them. Patches the
harness's config builder (our code path, not DeepSpeed's). With CKPTDOC_DS_CPU_FUSED_ADAM the engines get
DeepSpeed's FusedAdam on the CPU (cpu_fused_adam.py), hence FP16_Optimizer at ZeRO stage 0;
with CKPTDOC_DS_CPU_ADAM DeepSpeedCPUAdam with its op in torch (cpu_adam.py), for 16-bit masters."""
import json
import os

if os.environ.get("CKPTDOC_DS_CPU_FUSED_ADAM") and os.environ.get("RANK") is not None:
    import cpu_fused_adam  # the entry's engines use FusedAdam (so FP16_Optimizer) on the CPU

    cpu_fused_adam.install()

if os.environ.get("CKPTDOC_DS_CPU_ADAM") and os.environ.get("RANK") is not None:
    import cpu_adam  # DeepSpeedCPUAdam with its op in torch: ZeRO's 16-bit masters need it

    cpu_adam.install()

_extra = os.environ.get("CKPTDOC_DS_ZERO_EXTRA")
_config_extra = os.environ.get("CKPTDOC_DS_CONFIG_EXTRA")
if (_extra or _config_extra) and os.environ.get("RANK") is not None:
    import ds_common

    _make_config = ds_common.make_config

    def _make_config_with_extra(*args, **kwargs):
        cfg = _make_config(*args, **kwargs)
        if _extra:
            cfg["zero_optimization"].update(json.loads(_extra))
        if _config_extra:
            cfg.update(json.loads(_config_extra))
        return cfg

    ds_common.make_config = _make_config_with_extra
