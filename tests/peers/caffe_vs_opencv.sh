#!/usr/bin/env bash
# Caffe models in calq against two references, on photos from the shared data:
#   opencv:    MTCNN det1/det2/det3 and UltraFace slim-320 vs OpenCV's DNN module
#              (cv2.dnn.readNetFromCaffe, Debian python3-opencv): every net output within 1e-4;
#   zoo:       a synthetic net using most layer types calq maps, random weights, vs OpenCV:
#              its outputs and the intermediate blobs OpenCV exposes unfused;
#   onnx-twin: UltraFace slim-320 from its prototxt/caffemodel vs its ONNX twin, both in calq.
# Both sides always run on the same input tensor: calq writes it with --dump.
#
# usage: caffe_vs_opencv.sh opencv|zoo|onnx-twin CALQ NPY_COMPARE SHARED_DIR
set -euo pipefail
mode=$1; calq=$2; compare=$3; shared=$4
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3 # Debian's python: the one that sees python3-opencv and numpy
faces=$shared/data/faces; mtcnn=$shared/models/mtcnn; uf=$shared/models/ultraface
. "$(dirname "$0")/../support/need.sh"
need_python numpy cv2
need_files "$mtcnn/det1.prototxt" "$mtcnn/det1.caffemodel" "$uf/slim-320.prototxt" "$faces/ultraface_1.jpg"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
fail=0

# opencv_case NAME NET INPUT PHOTO WxH MEAN STD [INPUT_SHAPE] [calq run options...]
opencv_case() {
  local name=$1 net=$2 input=$3 photo=$4 size=$5 mean=$6 std=$7 shape=${8:-}
  shift 8 || shift $#
  local d=$work/$name
  mkdir -p "$d/calq" "$d/cv"
  local args=(run --model "$net.prototxt" --weights "$net.caffemodel" --image "$input=$faces/$photo"
              --resize "$size" --mean "$mean" --std "$std" --dump "$input" --output-dir "$d/calq" "$@")
  if [ -n "$shape" ]; then args+=(--input-shape "$input:$shape"); fi
  if ! "$calq" "${args[@]}" 2>"$d/calq.log"; then
    echo "$name: calq run failed:"; cat "$d/calq.log"; fail=1; return
  fi
  local outs cv_outs
  outs=$(sed -n 's/^calq: output \([^:]*\): .*/\1/p' "$d/calq.log" | sort)
  cv_outs=$("$py" "$here/caffe_opencv_run.py" run "$net.prototxt" "$net.caffemodel" "$d/calq/$input.npy" "$d/cv" | sort)
  if [ "$outs" != "$cv_outs" ]; then
    echo "$name: the outputs differ: calq [$(echo $outs)] vs OpenCV [$(echo $cv_outs)]"; fail=1; return
  fi
  for o in $outs; do
    printf '%-28s %-8s ' "$name" "$o"
    "$compare" "$d/calq/$o.npy" "$d/cv/$o.npy" --atol 1e-4 --rtol 0 || fail=1
  done
}

zoo_case() {
  local d=$work/zoo blobs outs calq_outs p; mkdir -p "$d/calq"
  "$py" "$here/caffe_opencv_run.py" zoo "$d"
  # Blobs written once (OpenCV reports fused in-place chains under other names).
  blobs="lrn1,lrn2,elt,eprod,emax,cat,pw,ab,sg,th,el,fl,perm,resh,pa,up"
  "$calq" run --model "$d/zoo.prototxt" --weights "$d/zoo.caffemodel" --input "data=$d/data.npy" \
      --dump "$blobs,conv1,gconv" --output-dir "$d/calq" 2>"$d/calq.log" || { cat "$d/calq.log"; fail=1; return; }
  outs=$("$py" "$here/caffe_opencv_run.py" run "$d/zoo.prototxt" "$d/zoo.caffemodel" "$d/data.npy" "$d/cv" \
         "$blobs,relu1,prelu" | sort)
  calq_outs=$(sed -n 's/^calq: output \([^:]*\): .*/\1/p' "$d/calq.log" | sort)
  if [ "$outs" != "$calq_outs" ]; then
    echo "zoo: the outputs differ: calq [$(echo $calq_outs)] vs OpenCV [$(echo $outs)]"; fail=1; return
  fi
  # The in-place chains: calq names the final value after the blob (conv1 after BatchNorm,
  # Scale and ReLU; gconv after PReLU), OpenCV after the last layer (relu1, prelu).
  for p in $(echo $outs) ${blobs//,/ } conv1:relu1 gconv:prelu; do
    printf 'zoo %-8s ' "${p%%:*}"
    "$compare" "$d/calq/${p%%:*}.npy" "$d/cv/${p#*:}.npy" --atol 1e-4 --rtol 0 || fail=1
  done
}

if [ "$mode" = opencv ]; then
  # det1 is fully convolutional: a photo-sized input as well as the prototxt's own 12x12.
  opencv_case det1_120x160 "$mtcnn/det1" data mtcnn_test1.jpg 160x120 127.5 128 1,3,120,160
  opencv_case det1_12x12 "$mtcnn/det1" data mtcnn_test2.jpg 12x12 127.5 128
  opencv_case det1_120x160_ref "$mtcnn/det1" data mtcnn_test2.jpg 160x120 127.5 128 1,3,120,160 --ref
  for photo in mtcnn_test1 mtcnn_test2; do
    opencv_case "det2_$photo" "$mtcnn/det2" data $photo.jpg 24x24 127.5 128
    opencv_case "det3_$photo" "$mtcnn/det3" data $photo.jpg 48x48 127.5 128
  done
  for photo in ultraface_1 ultraface_5 ultraface_9; do
    opencv_case "slim-320_$photo" "$uf/slim-320" input $photo.jpg 320x240 127 128
  done
  # Reshaped to another size: the Reshape layers' -1 and the Permutes follow the input.
  opencv_case slim-320_640x480 "$uf/slim-320" input ultraface_3.jpg 640x480 127 128 1,3,480,640
  zoo_case
elif [ "$mode" = zoo ]; then
  zoo_case
elif [ "$mode" = onnx-twin ]; then
  # The Caffe model is the ONNX one with BatchNorm folded into the convolutions, cut before
  # the box decoding: Caffe's `boxes` are the raw regressions, the ONNX tensor '375' (the
  # Concat that feeds the decoding); `scores` are the same softmax in both. The per-head
  # reshaped tensors kept their ONNX names in the conversion, so they are compared too.
  # calq folds the ONNX BatchNorms into the convolutions by default, as the Caffe converter
  # did; when the build can run the graph unfolded (--no-fusion), that is checked as well.
  pairs="scores:scores boxes:375 243:243 257:257 289:289 303:303 329:329 343:343 361:361 373:373"
  variants="folded"
  if "$calq" run --help 2>&1 | grep -q -- --no-fusion; then variants="folded unfolded"; fi
  for photo in ultraface_1 ultraface_5 ultraface_9; do
    d=$work/twin_$photo; mkdir -p "$d/caffe"
    "$calq" run --model "$uf/slim-320.prototxt" --weights "$uf/slim-320.caffemodel" \
        --image "input=$faces/$photo.jpg" --resize 320x240 --mean 127 --std 128 \
        --dump input,243,257,289,303,329,343,361,373 --output-dir "$d/caffe" 2>/dev/null
    for v in $variants; do
      opts=(); if [ "$v" = unfolded ]; then opts=(--no-fusion); fi
      mkdir -p "$d/$v"
      "$calq" run "$uf/version-slim-320.onnx" --input "input=$d/caffe/input.npy" "${opts[@]}" \
          --dump 375,243,257,289,303,329,343,361,373 --output-dir "$d/$v" 2>/dev/null
      for p in $pairs; do
        printf '%-13s caffe %-6s onnx(%s) %-6s ' "$photo" "${p%%:*}" "$v" "${p#*:}"
        "$compare" "$d/caffe/${p%%:*}.npy" "$d/$v/${p#*:}.npy" --atol 1e-4 --rtol 0 || fail=1
      done
    done
  done
else
  echo "usage: $0 opencv|zoo|onnx-twin CALQ NPY_COMPARE SHARED_DIR" >&2; exit 2
fi
exit $fail
