#!/usr/bin/env bash
# Lists the code that branches on a source's kind (a catalog's `kind` string, a weights source's SourceKind)
# outside the sources themselves (core/*/sources/, core/*/weights/) and prints how many: #27 wants 0, callers
# ask the capabilities a source sets (Catalog::weights_only, single_file, description). Run from anywhere.
# --check: exit 1 when there is any (the ctest entry source_kind_branches).
cd "$(dirname "$0")/.." || exit 2
hits=$(grep -rnE 'kind\s*[!=]=\s*"(deepspeed|hf-folder|weights-file)"|kind\(\)\s*[!=]=\s*(weights::)?SourceKind' \
  core/src core/include views app | grep -vE '^core/(src|include/ckptdoc)/(sources|weights)/')
[ -n "$hits" ] && printf '%s\n' "$hits"
echo "branches on source kind outside the sources: $(printf '%s' "$hits" | grep -c .)"
[ "${1:-}" != --check ] || [ -z "$hits" ]
