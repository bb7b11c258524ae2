# torch's own DCP -> torch.save conversion, timed by bench_dcp_export.sh: format_utils.dcp_to_torch_save(DIR, OUT).
#   dcp_to_torch_save_reference.py DCP_DIR OUT_FILE
import sys

from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

dcp_to_torch_save(sys.argv[1], sys.argv[2])
