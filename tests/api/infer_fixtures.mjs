// infer_fixtures.mjs — what the inference tests (API and browser) share: PNG files
// made in memory (one colour, or a bare header that claims any size, for the
// decoder's pixel cap), and a small convolutional network.
export { solidPng as png } from '../lib/png.mjs';

/** A small convolutional network: conv (4 filters, 3×3) + in-place ReLU, then an
 *  InnerProduct and the deploy Softmax. */
export const CONV_NET = `name: "convy"
layer { name: "train-data" type: "Data" top: "data" top: "label" include { stage: "train" }
  data_param { batch_size: 4 } transform_param { scale: 0.0039 } }
layer { name: "val-data" type: "Data" top: "data" top: "label" include { stage: "val" }
  data_param { batch_size: 4 } transform_param { scale: 0.0039 } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: "xavier" } } }
layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
layer { name: "ip" type: "InnerProduct" bottom: "conv" top: "ip"
  inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
layer { name: "accuracy" type: "Accuracy" bottom: "ip" bottom: "label" top: "accuracy" include { stage: "val" } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" exclude { stage: "deploy" } }
layer { name: "prob" type: "Softmax" bottom: "ip" top: "prob" include { stage: "deploy" } }
`;
