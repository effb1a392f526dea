// infer_fixtures.mjs — what the inference tests (API and browser) share: PNG files
// made in memory (one colour, or a bare header that claims any size, for the
// decoder's pixel cap), and a small convolutional network.
import { colourNet } from './helpers.mjs';
export { solidPng as png } from '../lib/png.mjs';

/** A small convolutional network: conv (4 filters, 3×3) + in-place ReLU, then an
 *  InnerProduct and the deploy Softmax. */
export const CONV_NET = colourNet('convy', `layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: "xavier" } } }
layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
layer { name: "ip" type: "InnerProduct" bottom: "conv" top: "ip"
  inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }`, 'ip');
