"""The op registry: every op is declared once with ATen names, a meta rule and a cost rule, and the
meta rule agrees with what the implementation returns."""
import inspect

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.ops import registry
from nbxtensor.ops.registry import Cost, TensorMeta

from .conftest import TEST_DEVICE, to_nbx


def test_every_op_is_complete():
    ops = registry.all_ops()
    assert len(ops) >= 30
    for op in ops:
        # fused ops with no ATen counterpart are named in the nbx:: namespace; transformers' own ops as its
        # exported graphs name them
        assert op.aten and all(name.startswith(("aten::", "nbx::", "transformers::")) for name in op.aten), op.name
        assert callable(op.meta) and callable(op.cost) and callable(op.impl), op.name


def test_aten_lookup_and_unknown_op_error():
    assert registry.lookup("aten::cat.default").name == "cat"
    assert registry.lookup("aten::clone").name == "clone"
    with pytest.raises(KeyError, match="aten::frobnicate.default.*families that exist: .*copy"):
        registry.lookup("aten::frobnicate.default")


# torch.where is two ops under one name: the pointwise select and, with the condition alone, nonzero
DISPATCHED = {"where": ("where", "where_condition")}


def test_api_is_generated_from_registry():
    for op in registry.all_ops():
        for name in op.api:
            if name in DISPATCHED:
                assert op.name in DISPATCHED[name]
                continue
            assert getattr(nbx, name) is registry.public_function(op)
        for method in op.methods:
            assert getattr(nbx.Tensor, method) is registry.public_function(op)
        assert inspect.unwrap(registry.public_function(op)) is op.impl


CASES = [
    ("cat", lambda a, b: ([a, b], 0)),
    ("stack", lambda a, b: ([a, b], 1)),
    ("clone", lambda a, b: (a,)),
    ("permute", lambda a, b: (a, (1, 0))),
    ("reshape", lambda a, b: (a, (-1,))),
    ("transpose", lambda a, b: (a, 0, 1)),
    ("split", lambda a, b: (a, 2, 1)),
    ("unsqueeze", lambda a, b: (a, -1)),
    ("select", lambda a, b: (a, 1, -1)),
    ("copy_", lambda a, b: (a, b)),
]


@pytest.mark.parametrize("name,make_args", CASES, ids=[c[0] for c in CASES])
def test_meta_matches_implementation(name, make_args):
    op = registry.get(name)
    a = to_nbx(np.arange(12, dtype=np.float32).reshape(3, 4))
    b = to_nbx(np.ones((3, 4), dtype=np.float16))
    metas = op.meta(*make_args(TensorMeta((3, 4), nbx.float32), TensorMeta((3, 4), nbx.float16)))
    out = op(*make_args(a, b))
    outs = out if isinstance(out, tuple) else (out,)
    metas = (metas,) if isinstance(metas, TensorMeta) else metas
    assert [(tuple(o.shape), o.dtype) for o in outs] == [(tuple(m.shape), m.dtype) for m in metas]


def test_cost_rules_count_bytes():
    m = TensorMeta((1024,), nbx.bfloat16)
    assert registry.get("clone").cost(m) == Cost(bytes_read=2048, bytes_written=2048)
    cat_cost = registry.get("cat").cost([m, TensorMeta((1024,), nbx.float32)])
    assert cat_cost.bytes_read == 2048 + 4096 and cat_cost.bytes_written == 2048 * 4
    assert registry.get("zeros").cost(4, 4, dtype=nbx.float64).bytes_written == 128
    assert registry.get("permute").cost(m, (0,)) == Cost()
    # take reads and writes its result's elements, of the input's dtype (not the int64 index's)
    values, index = TensorMeta((5,), nbx.complex128), TensorMeta((3,), nbx.int64)
    assert registry.get("take").cost(values, index) == Cost(bytes_read=48, bytes_written=48)


def test_meta_rules_need_no_device():
    meta = registry.get("zeros").meta(2, 3, dtype=nbx.int8)
    assert meta == TensorMeta((2, 3), nbx.int8)
    assert registry.get("arange").meta(0, 10, 3) == TensorMeta((4,), nbx.int64)
    assert TEST_DEVICE


def test_tensor_attributes_are_declared_once_and_set_only_by_bind(monkeypatch):
    """Tensor attributes that are no op's method go through ``registry.tensor_attribute``: a second
    declaration of a name, or a name an op's ``methods=`` claims too, is refused; ``bind`` sets them."""
    monkeypatch.setattr(registry, "_TENSOR_ATTRIBUTES", {})
    registry.tensor_attribute("probe_", lambda self: "probed")
    with pytest.raises(ValueError, match="'probe_' is declared twice"):
        registry.tensor_attribute("probe_", lambda self: None)

    class Host:
        pass

    namespace = {}
    registry.bind(namespace, Host)
    assert Host().probe_() == "probed" and Host.clone is registry.public_function(registry.get("clone"))
    registry.tensor_attribute("clone", lambda self: None)
    with pytest.raises(ValueError, match="'clone' is declared by op 'clone' and on its own"):
        registry.bind(namespace, Host)


# torch.nn.functional's names nbxtensor has, as they were before the registry declared them with their ops
FUNCTIONAL_NAMES = (
    "act_and_mul", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
    "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d", "adaptive_max_pool2d_with_indices",
    "adaptive_max_pool3d", "adaptive_max_pool3d_with_indices", "add_layer_norm", "add_rms_norm", "affine_grid",
    "avg_pool1d", "avg_pool2d", "avg_pool3d", "batch_norm", "bilinear", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "celu", "celu_", "channel_shuffle", "conv1d", "conv2d", "conv3d",
    "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "cosine_embedding_loss", "cosine_similarity",
    "cross_entropy", "ctc_loss", "dropout", "dropout1d", "dropout2d", "dropout3d", "elu", "elu_", "embedding",
    "embedding_bag", "fold", "fractional_max_pool2d", "fractional_max_pool3d", "gaussian_nll_loss", "gelu", "glu",
    "grid_sample", "group_norm", "hardshrink", "hardsigmoid", "hardswish", "hardtanh", "hardtanh_",
    "hinge_embedding_loss", "huber_loss", "instance_norm", "interpolate", "kl_div", "kv_cache_append", "l1_loss",
    "layer_norm", "leaky_relu", "leaky_relu_", "linear", "local_response_norm", "log_softmax", "logsigmoid",
    "lp_pool1d", "lp_pool2d", "lp_pool3d", "margin_ranking_loss", "max_pool1d", "max_pool1d_with_indices",
    "max_pool2d", "max_pool2d_with_indices", "max_pool3d", "max_pool3d_with_indices", "max_unpool1d",
    "max_unpool2d", "max_unpool3d", "mish", "mse_loss", "multi_head_attention_forward", "multi_margin_loss",
    "multilabel_margin_loss", "multilabel_soft_margin_loss", "nll_loss", "normalize", "one_hot", "pad",
    "paged_attention", "pairwise_distance", "pdist", "pixel_shuffle", "pixel_unshuffle", "poisson_nll_loss",
    "prefill_attention", "prelu", "relu", "relu6", "relu_", "rms_norm", "rotary_append", "rotary_embedding",
    "rrelu", "rrelu_", "scaled_dot_product_attention", "selu", "selu_", "sigmoid", "silu", "smooth_l1_loss",
    "soft_margin_loss", "softmax", "softmin", "softplus", "softshrink", "softsign", "tanh", "tanhshrink",
    "threshold", "threshold_", "triplet_margin_loss", "triplet_margin_with_distance_loss", "unfold",
    "upsample_bilinear", "upsample_nearest",
)


def test_nn_functional_is_built_from_the_registry():
    from nbxtensor.nn import functional
    public = sorted(name for name in dir(functional) if not name.startswith("_"))
    assert public == sorted(FUNCTIONAL_NAMES)
    assert functional.__all__ == public
    declared = {name: op for op in registry.all_ops() for name in op.functional}
    assert sorted(declared) == public
    for name, op in declared.items():
        assert getattr(functional, name) is (op.functional_form or op.impl), name
    # torch's argument order (input, weight) where the op takes ATen's (weight, indices)
    assert functional.embedding is not registry.get("embedding").impl
    assert functional.unfold is registry.get("unfold_blocks").impl
    assert functional.relu_ is registry.get("relu_").impl


def test_a_functional_name_is_declared_once():
    with pytest.raises(ValueError, match="nn.functional.relu is claimed by 'relu' and 'my_relu'"):
        registry.register("my_relu", family="pointwise", aten=["nbx::my_relu"], meta=lambda x: x,
                          cost=lambda x: Cost(), functional=("relu",))(lambda x: x)
    assert "my_relu" not in [op.name for op in registry.all_ops()]


def test_alias_facts_are_declared_with_the_op():
    maybe = {op.name for op in registry.all_ops() if op.aliases == registry.MAYBE_VIEW}
    assert maybe == {"reshape", "flatten", "unflatten", "to", "contiguous"}
    for op in registry.all_ops():
        # the view family is the ops whose outputs are views, the maybe-views aside
        assert (op.aliases == registry.VIEW) == (op.family == "view" and op.name not in maybe), op.name
    with pytest.raises(ValueError, match="aliases must be None, VIEW or MAYBE_VIEW"):
        registry.register("my_view", family="view", aten=["nbx::my_view"], meta=lambda x: x, cost=lambda x: Cost(),
                          aliases="always")(lambda x: x)


# ATen overloads whose arguments differ from the implementation's torch signature
ADAPTED_OVERLOADS = (
    "aten::_log_softmax.default", "aten::_softmax.default", "aten::_to_copy.default", "aten::_index_put_impl_.default",
    "aten::add.Scalar", "aten::add.Scalar_out", "aten::add_.Scalar", "aten::batch_norm.default",
    "aten::binary_cross_entropy.default", "aten::binary_cross_entropy_with_logits.default",
    "aten::cross_entropy_loss.default", "aten::einsum.default", "aten::elu.default", "aten::elu.out",
    "aten::elu_.default", "aten::expand.default", "aten::huber_loss.default", "aten::instance_norm.default",
    "aten::kl_div.default", "aten::l1_loss.default", "aten::mse_loss.default", "aten::nll_loss.default",
    "aten::nll_loss2d.default", "aten::nll_loss_nd.default", "aten::polygamma_.default", "aten::rsub.Scalar",
    "aten::rsub.Scalar_out",
    "aten::smooth_l1_loss.default", "aten::stft.default", "aten::sub.Scalar", "aten::sub.Scalar_out", "aten::sub_.Scalar",
    "aten::tensordot.default", "aten::to.device", "aten::to.dtype", "aten::to.dtype_layout",
)


def test_aten_adapters_are_declared_with_the_op():
    from nbxtensor.graph import calling
    adapted = {overload for op in registry.all_ops() for overload in op.adapters}
    assert adapted == set(ADAPTED_OVERLOADS)
    for overload in ADAPTED_OVERLOADS:
        assert calling.adapter(overload) is registry.lookup(overload).adapters[overload]
    assert calling.adapter("aten::add.Tensor") is None and calling.adapter("aten::frobnicate.default") is None
    # the in-place overload's adapter is the in-place op's
    assert "aten::add_.Scalar" in registry.get("add_").adapters
    assert "aten::add_.Scalar" not in registry.get("add").adapters
    assert calling.adapt("aten::add.Scalar", ("x", 2, 3), {}) == (("x", 2), {"alpha": 3})
    assert calling.adapt("aten::nll_loss.default", ("x", "t", None, 1, -100), {}) == (
        ("x", "t"), {"weight": None, "reduction": 1, "ignore_index": -100})
    assert calling.adapt("aten::expand.default", ("x", (2, 3)), {"implicit": False}) == (("x", (2, 3)), {})
    with pytest.raises(ValueError, match="adapts ATen overloads it does not implement"):
        registry.register("my_adapted", family="copy", aten=["nbx::my_adapted"], meta=lambda x: x,
                          cost=lambda x: Cost(),
                          adapters={"aten::my_adapted.default": lambda a, k: (a, k)})(lambda x: x)


# (in-place op, the variant the registry derives from it)
DERIVED_VARIANTS = [("index_put_", "index_put"), ("scatter_", "scatter"), ("scatter_add_", "scatter_add"),
                    ("scatter_reduce_", "scatter_reduce"), ("index_add_", "index_add"), ("index_copy_", "index_copy"),
                    ("index_fill_", "index_fill"), ("index_reduce_", "index_reduce"), ("rrelu_", "rrelu")]


@pytest.mark.parametrize("inplace, out_of_place", DERIVED_VARIANTS)
def test_variants_are_derived_from_one_declaration(inplace, out_of_place):
    inplace_op, op = registry.get(inplace), registry.get(out_of_place)
    assert op.family == inplace_op.family
    assert [a.replace(f"::{inplace}.", f"::{out_of_place}.") for a in inplace_op.aten if f"::{inplace}." in a] == \
        list(op.aten)
    assert inplace_op.methods == tuple(m + "_" for m in op.methods)
    assert getattr(nbx.Tensor, inplace) is registry.public_function(inplace_op)


def test_an_out_of_place_variant_works_on_a_copy_and_costs_it(rng):
    x = to_nbx(np.zeros((3, 2), np.float32))
    index, values = to_nbx(np.array([2, 0])), to_nbx(np.ones((2, 2), np.float32))
    out = nbx.index_put(x, (index,), values)
    assert np.array_equal(out.numpy(), [[1, 1], [0, 0], [1, 1]]) and not x.numpy().any()
    # the in-place op's cost, its workspace (the gathered index rows) included, and the copy of x
    inplace_cost = registry.get("index_put_").cost(x, (index,), values)
    cost = registry.get("index_put").cost(x, (index,), values)
    assert cost.workspace == inplace_cost.workspace > 0
    assert cost.bytes_read == inplace_cost.bytes_read + 24 and cost.bytes_written == inplace_cost.bytes_written + 24


def test_an_inplace_variant_passes_inplace_true(rng):
    x = to_nbx(np.array([-1.0, 2.0], np.float32))
    rrelu_ = registry.get("rrelu_").impl
    assert "inplace" not in inspect.signature(rrelu_).parameters
    assert rrelu_(x, 0.5, 0.5) is x  # in inference, the mean slope (0.5) on x itself
    assert np.array_equal(x.numpy(), [-0.5, 2.0])
    generator = nbx.Generator(TEST_DEVICE).manual_seed(0)
    assert rrelu_(x, 0.25, 0.25, True, generator) is x  # generator by position after training
    assert np.array_equal(x.numpy(), [-0.125, 2.0])


def test_a_variant_is_declared_on_the_right_op():
    with pytest.raises(ValueError, match="OUT_OF_PLACE is the variant of an in-place op"):
        registry.register("my_op", family="copy", aten=["nbx::my_op"], meta=lambda x: x, cost=lambda x: Cost(),
                          variants=(registry.OUT_OF_PLACE,))(lambda x: x)
    with pytest.raises(ValueError, match="variants are OUT, OUT_EXACT, INPLACE and OUT_OF_PLACE"):
        registry.register("my_op", family="copy", aten=["nbx::my_op"], meta=lambda x: x, cost=lambda x: Cost(),
                          variants=("copy",))(lambda x: x)
    with pytest.raises(ValueError, match="OUT and OUT_EXACT are two forms of one out="):
        registry.register("my_op", family="copy", aten=["nbx::my_op"], meta=lambda x: x, cost=lambda x: Cost(),
                          variants=(registry.OUT, registry.OUT_EXACT))(lambda x: x)
    with pytest.raises(KeyError):
        registry.get("my_op")  # a refused declaration leaves no trace


def test_an_out_variant_writes_the_result_into_out():
    x = to_nbx(np.array([[3.0, 1.0, 2.0]], np.float32))
    values, indices = to_nbx(np.zeros((1, 3), np.float32)), to_nbx(np.zeros((1, 3), np.int64))
    # sort and histogram took out= and left it untouched
    result = nbx.sort(x, out=(values, indices))
    assert result.values is values and result.indices is indices
    assert np.array_equal(values.numpy(), [[1, 2, 3]]) and np.array_equal(indices.numpy(), [[1, 2, 0]])
    hist, edges = to_nbx(np.zeros(0, np.float32)), to_nbx(np.zeros(0, np.float32))  # empty: resized
    assert nbx.histogram(x, 2, out=(hist, edges)).hist is hist
    assert np.array_equal(hist.numpy(), [1, 2]) and np.array_equal(edges.numpy(), [1, 2, 3])
    # the result cast into out's dtype where ATen casts it
    q = to_nbx(np.zeros((), np.float64))
    assert nbx.quantile(x, 0.5, out=q) is q and q.item() == 2.0
    with pytest.raises(RuntimeError, match="result type float32 can't be cast to the desired output type int64"):
        nbx.quantile(x, 0.5, out=to_nbx(np.zeros((), np.int64)))
    with pytest.raises(RuntimeError, match=r"sort: output with shape \(3,\) doesn't match the result's shape \(1, 3\)"):
        nbx.sort(x, out=(to_nbx(np.zeros(3, np.float32)), indices))
    with pytest.raises(TypeError, match="sort: out must be a tuple of 2 tensors"):
        nbx.sort(x, out=values)
    # every output is checked before any is written
    untouched = to_nbx(np.full((1, 3), 7.0, np.float32))
    with pytest.raises(RuntimeError, match=r"sort: output with shape \(2,\) doesn't match"):
        nbx.sort(x, out=(untouched, to_nbx(np.zeros(2, np.int64))))
    assert np.array_equal(untouched.numpy(), [[7, 7, 7]])
    # the rules never see out
    assert registry.get("sort").meta(x, out=(values, indices))[0].shape == (1, 3)
    assert "out" in inspect.signature(registry.get("cross").impl).parameters


# Ops whose meta and cost rules take the call's arguments as they come, each group for the reason
# docs/architecture.md gives ("Writing an op"); every other op declares bound=True. The pointwise table
# rows are left out of the list: their rows' parser binds their arguments.
UNBOUND_BY_DESIGN = {
    # view_op: the meta rule is the implementation itself run on a memoryless tensor
    "view": "as_strided broadcast_to chunk diagonal dsplit expand flatten hsplit imag linalg.diagonal movedim "
            "narrow permute ravel real reshape select slice split split_with_sizes squeeze t tensor_split "
            "transpose unbind unflatten unfold unsafe_chunk unsafe_split unsqueeze view view_as_complex "
            "view_as_real vsplit",
    # the *_copy forms: the view's own rules, whichever arguments the view takes
    "copy of a view": "alias_copy as_strided_copy diagonal_copy expand_copy narrow_copy permute_copy "
                      "split_with_sizes_copy squeeze_copy t_copy transpose_copy unbind_copy unfold_copy "
                      "unsqueeze_copy view_copy",
}


def _pointwise_rows() -> set:
    from nbxtensor.ops import pointwise_table, special_polynomials, special_table
    rows = [*pointwise_table.TABLE, *special_table.TABLE, *special_polynomials.TABLE]
    return {row.name for row in rows} | {row.name + "_" for row in rows if row.inplace}


def test_every_op_declares_bound_rules_but_those_listed():
    allowed = {name for names in UNBOUND_BY_DESIGN.values() for name in names.split()}
    unbound = {op.name for op in registry.all_ops() if not op.bound} - _pointwise_rows()
    assert not unbound - allowed, f"ops to declare with bound=True: {sorted(unbound - allowed)}"
    assert not allowed - unbound, f"listed as unbound but bound (or gone): {sorted(allowed - unbound)}"


def test_an_exact_out_variant_refuses_other_dtypes_before_writing():
    x = to_nbx(np.array([1.5, -3.0], np.float32))
    mantissa, exponent = to_nbx(np.zeros(2, np.float32)), to_nbx(np.zeros(2, np.int32))
    assert nbx.frexp(x, out=(mantissa, exponent)).exponent is exponent
    assert np.array_equal(mantissa.numpy(), [0.75, -0.75]) and np.array_equal(exponent.numpy(), [1, 2])
    # an int64 exponent could hold the result (OUT would cast into it), but frexp's is int32 only; every
    # output is checked before any is written, so the mantissa stays as it was
    untouched = to_nbx(np.full(2, 7.0, np.float32))
    with pytest.raises(RuntimeError, match=r"frexp\(\) expects exponent to have dtype int32 but got int64"):
        nbx.frexp(x, out=(untouched, to_nbx(np.zeros(2, np.int64))))
    assert np.array_equal(untouched.numpy(), [7.0, 7.0])
    with pytest.raises(RuntimeError, match=r"frexp\(\) expects mantissa to have dtype float32 but got float64"):
        nbx.frexp(x, out=(to_nbx(np.zeros(2, np.float64)), exponent))
    op = registry.get("frexp")
    assert op.bound and op.meta(x, out=(mantissa, exponent))[1] == TensorMeta((2,), nbx.int32)


def test_bound_rules_get_the_arguments_bound_once():
    x = TensorMeta((2, 3), nbx.float16)
    softmax = registry.get("softmax")
    # the defaults come from the implementation's signature, whichever way the arguments came
    assert softmax.meta(x, 1) == softmax.meta(x, dim=1) == TensorMeta((2, 3), nbx.float16)
    assert softmax.meta(x, -1, nbx.float32).dtype is nbx.float32
    assert softmax.cost(x, 1) == softmax.cost(x, dim=1, dtype=None)
    with pytest.raises(TypeError, match="softmax.. got an unexpected keyword argument 'axis'"):
        softmax.meta(x, axis=1)
    layer_norm = registry.get("layer_norm")
    weight = TensorMeta((3,), nbx.float16)
    assert layer_norm.cost(x, (3,), weight).bytes_read == layer_norm.cost(x, [3], weight=weight).bytes_read == 18
    bind = registry.arguments_binder("f", lambda x, /, y, *rest, z=2, **extra: None)
    bound = bind(1, 2, 3, w=4)
    assert (bound.x, bound.y, bound.rest, bound.z, bound.extra) == (1, 2, (3,), 2, {"w": 4})


def test_bound_rules_read_arguments_however_they_come():
    # max_pool2d's rules took return_indices by keyword only: by position it gave one result, not two
    x = to_nbx(np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4))
    op = registry.get("max_pool2d")
    values, indices = op.impl(x, 2, None, 0, 1, False, True)
    meta = op.meta(x, 2, None, 0, 1, False, True)
    assert meta == (TensorMeta((1, 1, 2, 2), nbx.float32), TensorMeta((1, 1, 2, 2), nbx.int64))
    assert (tuple(values.shape), tuple(indices.shape), indices.dtype) == (meta[0].shape, meta[1].shape, meta[1].dtype)
    assert op.cost(x, 2, None, 0, 1, False, True).bytes_written == 4 * 4 + 4 * 8


def test_an_inplace_variant_rules_see_the_call_as_its_implementation_does():
    x = TensorMeta((2, 3), nbx.float32)
    rrelu_ = registry.get("rrelu_")
    # generator by position, after training: it is no inplace flag to the rules
    assert rrelu_.cost(x, 0.1, 0.2, True, None).workspace == registry.get("rrelu").cost(x, training=True).workspace > 0
    with pytest.raises(RuntimeError, match="Lower bound should be less than or equal to the upper bound"):
        rrelu_.meta(x, 0.3, 0.2)
