"""Damages a copy of a DCP folder the way a cut-short write would: one storage item's length in .metadata made
shorter, so the item ends inside its bytes (a zstd item: inside its frame). .metadata is read and written back
with pickle as torch's FileSystemWriter writes it (torch's own Metadata and _StorageInfo dataclasses).

Usage: dcp_item_length_edit.py DCP_DIR FQN NEW_LENGTH   (run in the judges' venv, on a copy only)
Prints JSON {"fqn", "file", "offset", "old_length", "new_length"}.
"""
import dataclasses
import json
import os
import pickle
import sys

import torch.distributed.checkpoint  # noqa: F401 - the classes the pickle names


def main():
    folder, fqn, new_length = sys.argv[1], sys.argv[2], int(sys.argv[3])
    path = os.path.join(folder, ".metadata")
    with open(path, "rb") as f:
        md = pickle.load(f)
    (index,) = [k for k in md.storage_data if k.fqn == fqn]
    info = md.storage_data[index]
    if not 0 < new_length < info.length:
        raise SystemExit(f"{fqn}: new length {new_length} is not shorter than {info.length}")
    md.storage_data[index] = dataclasses.replace(info, length=new_length)
    with open(path, "wb") as f:
        pickle.dump(md, f)
    print(json.dumps(dict(fqn=fqn, file=info.relative_path, offset=info.offset, old_length=info.length,
                          new_length=new_length)))


if __name__ == "__main__":
    main()
