#!/bin/sh
# One table of quantizable kinds (src/graph/qkind.c, issue 10): the names of the quantizable
# kinds appear as string literals only in the files allowed below, so that adding a kind is one
# row plus its export / kernel code, not a hunt for every strcmp. Everything else asks the table
# (graph/qkind.h, graph/quantizable.h).
# usage: qkind_literals.sh SRC_DIR
src=${1:?usage: qkind_literals.sh SRC_DIR}
cd "$src" || exit 1

names='"Conv" "ConvTranspose" "Gemm" "MatMul" "AveragePool" "InnerProduct" "Convolution" "Deconvolution" "Pooling" "LSTM" "GRU" "RNN"'

# file: why it may name them
allowed='
graph/qkind.c            the table itself
exec/kernels/conv.c      op registry entries and their kernels
exec/kernels/gemm.c      op registry entries and their kernels
exec/kernels/pool.c      op registry entries and their kernels
exec/kernels/rnn.c       op registry entries and their kernels
graph/fuse_qdq.c         the QDQ fusion pass: onnxruntime rules for the operators it fuses
graph/lower_ascend.c     the Ascend deploy lowering pass: the ops with an internal integer operator
frontend/caffe_layers.c  the Caffe layer registry (layer type -> mapper) and LRN helper nodes
frontend/caffe_net.c     Caffe V1 layer-type enum names (the Caffe schema)
'
is_allowed() {
    echo "$allowed" | awk '{print $1}' | grep -qxF "$1"
}

fail=0
checked=0
for name in $names; do
    files=$(grep -rlF --include='*.c' --include='*.h' -- "$name" . | sed 's|^\./||' | sort)
    # the table names every kind: if it does not, this grep is not seeing what it should
    if ! echo "$files" | grep -qxF graph/qkind.c; then
        echo "qkind_literals: $name is not in graph/qkind.c: the scan is broken or the table lost a kind"
        fail=1
    fi
    for f in $files; do
        checked=$((checked + 1))
        if ! is_allowed "$f"; then
            echo "qkind_literals: src/$f compares or builds the kind name $name; read the quantizable-kind table" \
                 "(graph/qkind.h, graph/quantizable.h) instead:"
            grep -nF -- "$name" "$f" | sed 's/^/    /'
            fail=1
        fi
    done
done
# an allow-list entry that no longer names any kind is stale: remove it
for f in $(echo "$allowed" | awk 'NF {print $1}'); do
    hit=0
    for name in $names; do grep -qF -- "$name" "$f" 2>/dev/null && hit=1; done
    if [ $hit = 0 ]; then
        echo "qkind_literals: src/$f is allowed but names no quantizable kind any more: remove it from $0"
        fail=1
    fi
done
n_allowed=$(echo "$allowed" | awk 'NF' | wc -l)
if [ $fail = 0 ]; then
    echo "qkind_literals: ok ($checked file hits, all in the $n_allowed allowed files)"
fi
exit $fail
