"""Conformance cases (kind `onnxc`, names `test_ml_*`) for the ai.onnx.ml domain, made by the
real converters: scikit-learn models through skl2onnx, LightGBM and XGBoost models through
onnxmltools — tree ensembles (random forests, gradient boosting, LightGBM, XGBoost;
regressors and binary/multiclass classifiers with integer and string labels, with and
without ZipMap), linear models and SVMs, and pipelines with scalers, normalizers, imputers
and one-hot encoders, DictVectorizer pipelines over map inputs, and the other estimators
skl2onnx converts (neighbours, k-means, PCA, naive Bayes, MLPs, isolation forests, voting,
stacking, calibration, Gaussian mixtures and processes) — plus a few models written by hand
for what the converters do not emit (float64 thresholds compared against float32 inputs,
TreeEnsemble of ai.onnx.ml opset 5, every node rule). Trained on small seeded synthetic data, so generation is deterministic
and takes seconds.

Expected outputs come from onnxruntime (graph optimizations off); a ZipMap output (a
sequence of maps) is written as the [N, C] tensor onnxc exposes, its columns in key order.
Inputs get a concrete batch dimension (onnxc compiles static shapes); a map input is
written as an ONNX MapProto file."""
from __future__ import annotations

import os
import shutil
import warnings

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

warnings.filterwarnings("ignore")

BATCH = 24


def _fixed_batch(m: onnx.ModelProto, n: int) -> onnx.ModelProto:
    """Gives every graph input a concrete first dim and drops the outputs' shapes (the
    converters declare some with a symbolic batch, some with 1)."""
    for x in m.graph.input:
        t = x.type.tensor_type
        if t.HasField("shape") and len(t.shape.dim) > 0:
            d = t.shape.dim[0]
            d.Clear()
            d.dim_value = n
    for o in m.graph.output:
        if o.type.HasField("tensor_type"):
            o.type.tensor_type.ClearField("shape")
    del m.graph.value_info[:]
    return m


def _zipmap_keys(m: onnx.ModelProto, out_name: str):
    for n in m.graph.node:
        if n.op_type == "ZipMap" and n.output[0] == out_name:
            for a in n.attribute:
                if a.name == "classlabels_int64s":
                    return list(a.ints)
                if a.name == "classlabels_strings":
                    return [s.decode() for s in a.strings]
    return None


def _to_proto(value, name: str) -> TensorProto:
    a = np.asarray(value)
    if a.dtype.kind in "UO":
        t = TensorProto(name=name, data_type=TensorProto.STRING, dims=list(a.shape))
        t.string_data.extend(str(v).encode() for v in a.reshape(-1))
        return t
    return numpy_helper.from_array(a, name)


def _map_proto(d: dict, x: onnx.ValueInfoProto) -> onnx.MapProto:
    """A map input's value as an ONNX MapProto of the input's key and value types: its keys,
    then one scalar tensor per value (numpy_helper.from_dict's layout, which that function
    cannot make for string keys)."""
    mt = x.type.map_type
    m = onnx.MapProto(name=x.name, key_type=mt.key_type)
    if mt.key_type == TensorProto.STRING:
        m.string_keys.extend(str(k).encode() for k in d)
    else:
        m.keys.extend(int(k) for k in d)
    m.values.elem_type = onnx.SequenceProto.TENSOR
    dtype = helper.tensor_dtype_to_np_dtype(mt.value_type.tensor_type.elem_type)
    for v in d.values():
        m.values.tensor_values.append(_to_proto(np.array(v, dtype=dtype), ""))
    return m


def _oracle_model(m: onnx.ModelProto) -> onnx.ModelProto:
    """`m` as onnxruntime runs it here: a StringNormalizer without a locale gets C.UTF-8,
    since onnxruntime's default (en_US.UTF-8) is missing on minimal Linux installs (its case
    mapping of these cases' text is the same); the saved model keeps none."""
    o = onnx.ModelProto()
    o.CopyFrom(m)
    for n in o.graph.node:
        if n.op_type == "StringNormalizer" and not any(a.name == "locale" for a in n.attribute):
            n.attribute.append(helper.make_attribute("locale", "C.UTF-8"))
    return o


def write_ml_case(out_dir: str, name: str, m: onnx.ModelProto, feeds, rtol=1e-4, atol=1e-5) -> dict:
    """Writes OUT/onnxc/<name> with onnxruntime's outputs for `feeds` (a dict of inputs, or a
    list of them: one test data set each). A map input's feed is a dict (a MapProto file)."""
    d = os.path.join(out_dir, "onnxc", name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d, exist_ok=True)
    onnx.save(m, os.path.join(d, "model.onnx"))
    inits = {i.name for i in m.graph.initializer}
    runtime_inputs = [x for x in m.graph.input if x.name not in inits]
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(_oracle_model(m).SerializeToString(), so, providers=["CPUExecutionProvider"])
    for k, feed in enumerate(feeds if isinstance(feeds, list) else [feeds]):
        ds = os.path.join(d, f"test_data_set_{k}")
        os.makedirs(ds, exist_ok=True)
        for i, x in enumerate(runtime_inputs):
            value = feed[x.name]
            proto = _map_proto(value, x) if x.type.HasField("map_type") else _to_proto(value, x.name)
            with open(os.path.join(ds, f"input_{i}.pb"), "wb") as f:
                f.write(proto.SerializeToString())
        outs = sess.run(None, feed)
        for i, (o, v) in enumerate(zip(m.graph.output, outs)):
            if o.type.HasField("sequence_type") and o.type.sequence_type.elem_type.HasField("tensor_type"):
                # A sequence of tensors (MultiOutputClassifier's probabilities).
                seq = numpy_helper.from_list([np.asarray(t) for t in v], o.name)
                with open(os.path.join(ds, f"output_{i}.pb"), "wb") as f:
                    f.write(seq.SerializeToString())
                continue
            if isinstance(v, list):
                keys = _zipmap_keys(m, o.name)
                v = np.array([[row[k] for k in keys] for row in v], np.float32).reshape(len(v), len(keys))
            with open(os.path.join(ds, f"output_{i}.pb"), "wb") as f:
                f.write(_to_proto(v, o.name).SerializeToString())
    return {"kind": "onnxc", "name": name, "dir": d, "rtol": rtol, "atol": atol}


def _skl_case(out_dir: str, name: str, model, x, xt, **kw) -> dict:
    """A fitted scikit-learn model converted by skl2onnx (`kw`: its options) at the cases'
    batch, written with onnxruntime's outputs for the rows `xt`."""
    from skl2onnx import to_onnx
    m = _fixed_batch(to_onnx(model, x[:1], **kw), BATCH)
    return write_ml_case(out_dir, name, m, {m.graph.input[0].name: xt})


# ---- data ------------------------------------------------------------------------------

def _data(seed: int, n: int = 300, f: int = 6):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, f)).astype(np.float32)
    score = x[:, 0] + 0.5 * x[:, 1] * x[:, 2] - x[:, 3] ** 2 / 2
    return rng, x, score


def _test_rows(seed: int, f: int = 6, nan: bool = False):
    rng = np.random.default_rng(seed + 1000)
    x = rng.standard_normal((BATCH, f)).astype(np.float32)
    if nan:
        x[rng.random(x.shape) < 0.15] = np.nan
    return x


def _classes(score, k: int):
    edges = np.quantile(score, np.linspace(0, 1, k + 1)[1:-1])
    return np.digitize(score, edges)


# ---- tree ensembles ------------------------------------------------------------------------

def trees(out_dir: str) -> list:
    from lightgbm import LGBMClassifier, LGBMRegressor
    from onnxmltools import convert_lightgbm, convert_xgboost
    from onnxmltools.convert.common.data_types import FloatTensorType
    from sklearn.ensemble import (
        ExtraTreesRegressor,
        GradientBoostingClassifier,
        GradientBoostingRegressor,
        RandomForestClassifier,
        RandomForestRegressor,
    )
    from sklearn.tree import DecisionTreeClassifier
    from xgboost import XGBClassifier, XGBRegressor

    entries = []

    def skl(name, model, x, xt, **kw):
        entries.append(_skl_case(out_dir, name, model, x, xt, **kw))

    def mltools(name, convert, model, f, xt):
        m = convert(model, initial_types=[("X", FloatTensorType([None, f]))], target_opset=15)
        m = _fixed_batch(m, BATCH)
        entries.append(write_ml_case(out_dir, name, m, {"X": xt}))

    rng, x, s = _data(1)
    xt = _test_rows(1)
    skl("test_ml_random_forest_regressor", RandomForestRegressor(n_estimators=7, max_depth=5, random_state=0).fit(x, s), x, xt)
    skl("test_ml_extra_trees_regressor", ExtraTreesRegressor(n_estimators=4, max_depth=4, random_state=0).fit(x, s),
        x, xt)
    skl("test_ml_gradient_boosting_regressor", GradientBoostingRegressor(n_estimators=12, max_depth=3, random_state=0)
        .fit(x, s), x, xt)
    yb = (s > 0).astype(np.int64)
    skl("test_ml_random_forest_binary", RandomForestClassifier(n_estimators=6, max_depth=4, random_state=0).fit(x, yb),
        x, xt)
    y3 = np.array(["cat", "dog", "eel"])[_classes(s, 3)]
    skl("test_ml_random_forest_strings", RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0).fit(x, y3),
        x, xt)
    skl("test_ml_random_forest_no_zipmap", RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0)
        .fit(x, _classes(s, 4) * 10 + 3), x, xt, options={"zipmap": False})
    # decision_path and decision_leaf: each tree's leaf index as a single-target regressor whose
    # leaves list that index once per class (onnxruntime counts one of the copies).
    skl("test_ml_random_forest_decision_leaf", RandomForestClassifier(n_estimators=4, max_depth=3, random_state=0)
        .fit(x, _classes(s, 3)), x, xt, options={"zipmap": False, "decision_leaf": True, "decision_path": True})
    skl("test_ml_gradient_boosting_multiclass", GradientBoostingClassifier(n_estimators=6, max_depth=3, random_state=0)
        .fit(x, y3), x, xt)
    skl("test_ml_gradient_boosting_binary", GradientBoostingClassifier(n_estimators=8, max_depth=3, random_state=0)
        .fit(x, np.where(yb == 1, "yes", "no")), x, xt)
    skl("test_ml_decision_tree_multiclass", DecisionTreeClassifier(max_depth=6, random_state=0).fit(x, _classes(s, 5)),
        x, xt)
    # LightGBM (missing values go where training sent them) and XGBoost.
    xn = x.copy()
    xn[rng.random(xn.shape) < 0.1] = np.nan
    xtn = _test_rows(1, nan=True)
    lgb = dict(n_estimators=20, num_leaves=15, min_child_samples=5, verbose=-1, random_state=0)
    mltools("test_ml_lightgbm_regressor", convert_lightgbm, LGBMRegressor(**lgb).fit(xn, s), 6, xtn)
    mltools("test_ml_lightgbm_binary", convert_lightgbm, LGBMClassifier(**lgb).fit(xn, yb), 6, xtn)
    mltools("test_ml_lightgbm_multiclass", convert_lightgbm, LGBMClassifier(**lgb).fit(xn, _classes(s, 4)), 6, xtn)
    xgb = dict(n_estimators=15, max_depth=4, random_state=0)
    mltools("test_ml_xgboost_regressor", convert_xgboost, XGBRegressor(**xgb).fit(xn, s), 6, xtn)
    mltools("test_ml_xgboost_binary", convert_xgboost, XGBClassifier(**xgb).fit(xn, yb), 6, xtn)
    mltools("test_ml_xgboost_multiclass", convert_xgboost, XGBClassifier(**xgb).fit(xn, _classes(s, 3)), 6, xtn)
    return entries


# ---- linear models, SVMs and pipelines ------------------------------------------------------

def linear_and_pipelines(out_dir: str) -> list:
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import FloatTensorType, StringTensorType
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge, SGDClassifier
    from sklearn.multioutput import MultiOutputClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import (
        Binarizer,
        LabelEncoder,
        MaxAbsScaler,
        MinMaxScaler,
        Normalizer,
        OneHotEncoder,
        StandardScaler,
    )
    from sklearn.svm import SVC, SVR, LinearSVC

    entries = []

    def skl(name, model, x, xt, **kw):
        entries.append(_skl_case(out_dir, name, model, x, xt, **kw))

    rng, x, s = _data(2)
    xt = _test_rows(2)
    yb = (s > 0).astype(np.int64)
    y3 = np.array(["low", "mid", "high"])[_classes(s, 3)]
    skl("test_ml_logistic_regression_binary", LogisticRegression().fit(x, yb), x, xt)
    skl("test_ml_logistic_regression_multiclass", LogisticRegression(max_iter=500).fit(x, y3), x, xt)
    skl("test_ml_linear_regression", LinearRegression().fit(x, s), x, xt)
    skl("test_ml_ridge_two_targets", Ridge().fit(x, np.stack([s, x[:, 4]], 1)), x, xt)
    # Its probabilities are a sequence graph output: one tensor per target.
    skl(
        "test_ml_multioutput_classifier",
        MultiOutputClassifier(LogisticRegression()).fit(x, np.stack([yb, _classes(s, 3)], 1)),
        x,
        xt,
        options={"zipmap": False},
    )
    skl("test_ml_linear_svc_multiclass", LinearSVC().fit(x, _classes(s, 4)), x, xt)
    skl("test_ml_sgd_binary_no_zipmap", SGDClassifier(random_state=0).fit(x, yb), x, xt, options={"zipmap": False})
    skl("test_ml_pipeline_scaler_logistic", make_pipeline(StandardScaler(), LogisticRegression()).fit(x * 3 + 1, y3),
        x, xt * 3 + 1)
    skl("test_ml_pipeline_minmax_maxabs_ridge", make_pipeline(MinMaxScaler(), MaxAbsScaler(), Ridge()).fit(x, s), x, xt)
    xi = x.copy()
    xi[rng.random(xi.shape) < 0.1] = np.nan
    xti = xt.copy()
    xti[np.random.default_rng(5).random(xti.shape) < 0.1] = np.nan
    skl("test_ml_pipeline_imputer_normalizer", make_pipeline(SimpleImputer(), Normalizer(), LinearRegression())
        .fit(xi, s), xi, xti)
    skl("test_ml_pipeline_binarizer_logistic", make_pipeline(Binarizer(threshold=0.2), LogisticRegression())
        .fit(x, yb), x, xt)
    # SVMs: kernels with and without probabilities.
    skl("test_ml_svc_rbf_binary", SVC(gamma=0.3).fit(x[:120], yb[:120]), x, xt)
    skl("test_ml_svc_poly_multiclass", SVC(kernel="poly", degree=2, coef0=0.5).fit(x[:120], y3[:120]), x, xt)
    skl("test_ml_svc_linear_proba", SVC(kernel="linear", probability=True, random_state=0)
        .fit(x[:120], _classes(s, 3)[:120]), x, xt)
    skl("test_ml_svc_sigmoid_proba_binary", SVC(kernel="sigmoid", gamma=0.05, probability=True, random_state=0)
        .fit(x[:120], yb[:120]), x, xt)
    skl("test_ml_svr_rbf", SVR(gamma=0.2).fit(x[:120], s[:120]), x, xt)
    # Categorical columns: one-hot encoded strings and integers next to scaled numbers.
    cats = np.array(["red", "green", "blue", "cyan"])
    n = len(x)
    color = cats[rng.integers(0, 4, n)].reshape(-1, 1)
    size = rng.integers(0, 3, n).astype(np.int64).reshape(-1, 1)
    yc = ((color[:, 0] == "red") ^ (x[:, 0] > 0)).astype(np.int64)
    pipe = make_pipeline(
        ColumnTransformer([("num", StandardScaler(), slice(0, 3)),
                           ("cat", OneHotEncoder(handle_unknown="ignore"), slice(3, 5))]),
        RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0))
    data = np.concatenate([x[:, :3].astype(object), color, size.astype(str)], axis=1)
    pipe.fit(data, yc)
    m = to_onnx(pipe, initial_types=[("num", FloatTensorType([None, 3])), ("color", StringTensorType([None, 1])),
                                     ("size", StringTensorType([None, 1]))])
    trng = np.random.default_rng(7)
    feeds = {"num": _test_rows(3)[:, :3], "color": np.array(list(cats) + ["purple"])[trng.integers(0, 5, BATCH)]
             .reshape(-1, 1).astype(object), "size": trng.integers(0, 4, BATCH).astype(str).reshape(-1, 1)
             .astype(object)}
    entries.append(write_ml_case(out_dir, "test_ml_pipeline_onehot_forest", _fixed_batch(m, BATCH), feeds))
    le = LabelEncoder().fit(["apple", "pear", "fig", "kiwi"])
    m = to_onnx(le, initial_types=[("x", StringTensorType([None]))])
    entries.append(write_ml_case(out_dir, "test_ml_label_encoder_strings", _fixed_batch(m, BATCH),
                                 {"x": np.array(["fig", "kiwi", "apple", "pear"] * 6, dtype=object)}))
    return entries


def text_features(out_dir: str) -> list:
    """TfIdfVectorizer as text pipelines use it, against onnxruntime: string tokens (with
    words the pool lacks) counted as unigrams to trigrams with one skip, TF-IDF weighted;
    int64 tokens in IDF mode with a repeated n-gram and lengths left out of the count.
    RegexFullMatch against onnxruntime's RE2."""
    words = ["the", "cat", "sat", "on", "mat", "dog", "ran", "a"]
    pool = ["the", "cat", "dog", "mat", "a",            # unigrams
            "the", "cat", "cat", "sat", "on", "the",      # bigrams
            "the", "cat", "sat", "sat", "on", "the"]      # trigrams
    grams = 5 + 3 + 2
    rng = np.random.default_rng(11)
    cols = rng.permutation(grams).astype(np.int64)
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], mode="TFIDF", min_gram_length=1, max_gram_length=3,
                            max_skip_count=1, ngram_counts=[0, 5, 11], ngram_indexes=cols.tolist(),
                            pool_strings=pool, weights=(0.5 + rng.random(grams)).astype(np.float32).tolist())
    m = helper.make_model(helper.make_graph([node], "tfidf", [helper.make_tensor_value_info("x", TensorProto.STRING, [4, 16])],
                                            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, grams])]),
                          opset_imports=[helper.make_opsetid("", 9)])
    m.ir_version = 8
    x = np.array(words + ["zebra"], dtype=object)[rng.integers(0, len(words) + 1, (4, 16))]
    entries = [write_ml_case(out_dir, "test_text_tfidf_strings", m, {"x": x})]
    ipool = [3, 5, 9, 3, 5, 5, 9, 9, 3, 3, 5, 9, 1, 2, 3]   # 3 unigrams, 3 bigrams (one repeated), 3 trigrams
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], mode="IDF", min_gram_length=2, max_gram_length=2,
                            max_skip_count=2, ngram_counts=[0, 3, 9], ngram_indexes=[0, 1, 2, 3, 4, 3, 5, 6, 7],
                            pool_int64s=ipool, weights=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9])
    m = helper.make_model(helper.make_graph([node], "tfidf", [helper.make_tensor_value_info("x", TensorProto.INT64, [3, 20])],
                                            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 8])]),
                          opset_imports=[helper.make_opsetid("", 9)])
    m.ir_version = 8
    x = np.array([3, 5, 9, 1, 2])[rng.integers(0, 5, (3, 20))].astype(np.int64)
    entries.append(write_ml_case(out_dir, "test_text_tfidf_ints", m, {"x": x}))
    # RegexFullMatch (RE2 in onnxruntime): ASCII perl classes and word boundaries, UTF-8
    # characters under `.` and negated classes, case folding, counted repetition.
    patterns = [r"(\W|^)[\w.\-]{0,25}@(yahoo|gmail)\.com(\W|$)", r"\d{3}-\d{4}", r"(?i)h[eé]llo.*",
                r"[^a-z]+", r"\bcat\b.*", r".{2,3}", r"\w+\s\w+"]
    texts = ["bob@gmail.com", " ann.lee@yahoo.com!", "x@hotmail.com", "555-1234", "5551234", "Héllo wörld",
             "HELLO", "ÉTÉ", "été", "cat nap", "concat", "日本", "日本語x", "ab", "foo bar", "foo  bar", "", "é é"]
    outs = []
    nodes = []
    for k, pat in enumerate(patterns):
        nodes.append(helper.make_node("RegexFullMatch", ["x"], [f"y{k}"], pattern=pat))
        outs.append(helper.make_tensor_value_info(f"y{k}", TensorProto.BOOL, [len(texts)]))
    m = helper.make_model(helper.make_graph(nodes, "regex", [helper.make_tensor_value_info("x", TensorProto.STRING,
                                                                                          [len(texts)])], outs),
                          opset_imports=[helper.make_opsetid("", 20)])
    m.ir_version = 9
    entries.append(write_ml_case(out_dir, "test_text_regex_full_match", m, {"x": np.array(texts, dtype=object)}))
    return entries


def text_pipelines(out_dir: str) -> list:
    """scikit-learn text classifiers through skl2onnx (StringNormalizer, com.microsoft
    Tokenizer, TfIdfVectorizer, then a linear or naive Bayes classifier), on sentences of
    a small vocabulary with words the vocabulary lacks, punctuation, case, an empty
    document, a long one and accents; and the Tokenizer's modes on their own."""
    from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import MultinomialNB
    from sklearn.pipeline import make_pipeline
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import StringTensorType

    rng = np.random.default_rng(21)
    vocab = ("the quick brown fox jumps over lazy dog cat sat on mat hello world good bad great awful "
             "movie film plot acting café naïve").split()

    def sentences(n, seed):
        r = np.random.default_rng(seed)
        out = [" ".join(r.choice(vocab + ["zebra", "QUIRKY"], r.integers(2, 12))) for _ in range(n)]
        return [d.capitalize() + ("!" if i % 3 else ", really.") for i, d in enumerate(out)]

    docs = sentences(240, 22)
    score = np.array([("good" in d) + ("great" in d) - ("bad" in d) - ("awful" in d) for d in docs])
    labels = np.array(["neg", "neu", "pos"])[np.clip(score, -1, 1) + 1]
    # A long document too (some 6000 bytes, 1000 words): its tokens are counted as they are
    # found, however many (`kernels::TextTfIdf`).
    test = sentences(BATCH - 3, 23) + [" ".join(sentences(150, 24)), "", "Good GOOD movie café!"]
    feeds = {"text": np.array(test, dtype=object).reshape(-1, 1)}
    entries = []

    def add(name, pipe, y):
        pipe.fit(docs, y)
        m = to_onnx(pipe, initial_types=[("text", StringTensorType([None, 1]))])
        entries.append(write_ml_case(out_dir, name, _fixed_batch(m, BATCH), feeds))

    add("test_ml_text_tfidf_logistic", make_pipeline(TfidfVectorizer(), LogisticRegression(max_iter=500)), labels)
    add("test_ml_text_tfidf_bigrams_binary", make_pipeline(TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True),
                                                           LogisticRegression(max_iter=500)), score > 0)
    add("test_ml_text_count_stopwords_nb", make_pipeline(CountVectorizer(stop_words=["the", "on", "over"]),
                                                         MultinomialNB()), labels)
    add("test_ml_text_char_ngrams", make_pipeline(TfidfVectorizer(analyzer="char", ngram_range=(2, 3)),
                                                  LogisticRegression(max_iter=500)), labels)
    add("test_ml_text_count_cased_binary", make_pipeline(CountVectorizer(binary=True, lowercase=False),
                                                         LogisticRegression(max_iter=500)), labels)

    # The Tokenizer's modes on their own (onnxruntime's outputs; the token axis's length
    # depends on the data).
    def tokenizer(name, x, **attrs):
        node = helper.make_node("Tokenizer", ["x"], ["y"], domain="com.microsoft", **attrs)
        x = np.array(x, dtype=object)
        g = helper.make_graph([node], "tokenizer", [helper.make_tensor_value_info("x", TensorProto.STRING, list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.STRING, None)])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
        m.ir_version = 8
        entries.append(write_ml_case(out_dir, name, m, {"x": x}))

    texts = ["Hello world, hi!", "a bc  d", "", "héllo wörld 42", "x;;y;z w"]
    tokenizer("test_ms_tokenizer_tokenexp_marks", texts, mark=1, mincharnum=1, pad_value="#",
              tokenexp=r"\b\w\w+\b")
    tokenizer("test_ms_tokenizer_longest_match", [["ab abc", "a"], ["abcab", ""]], mark=0, mincharnum=1,
              pad_value="<pad>", tokenexp="a|ab|abc")
    tokenizer("test_ms_tokenizer_separators", texts, mark=0, mincharnum=2, pad_value="#",
              separators=[" ", ";", "a", "ab"])
    tokenizer("test_ms_tokenizer_characters", texts, mark=1, mincharnum=1, pad_value="#", separators=[""])
    tokenizer("test_ms_tokenizer_no_tokens", ["", "!?"], mark=1, mincharnum=1, pad_value="#", tokenexp="[a-z]+")
    return entries


def map_inputs(out_dir: str) -> list:
    """Map inputs (passed as onnxc_map): scikit-learn's DictVectorizer before a logistic
    regression and a random forest, as skl2onnx converts them (map(string, float)); a
    hand-written DictVectorizer over int64 keys (onnxruntime's Python binding feeds maps of
    float values only, so double and int64 values are covered by the runtime's unit tests); CastMap's SPARSE form to
    float and to int64. Each has maps with keys outside the vocabulary (ignored) and keys
    missing from it (zero)."""
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import DictionaryType, FloatTensorType, StringTensorType
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    rng = np.random.default_rng(91)
    words = ["red", "green", "blue", "size", "weight", "age", "price"]

    def record():
        picked = rng.choice(words, size=rng.integers(2, 6), replace=False)
        return {str(w): float(np.float32(rng.standard_normal())) for w in picked}

    x = [record() for _ in range(200)]
    y = [int(r.get("red", 0) + r.get("size", 0) > 0) for r in x]
    tests = [record() for _ in range(4)] + [{"unseen": 3.0, "red": -1.5}]
    entries = []
    for name, clf in [("logistic", LogisticRegression()),
                      ("forest", RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0))]:
        pipe = make_pipeline(DictVectorizer(sparse=False), clf).fit(x, y)
        m = convert_sklearn(pipe, initial_types=[("input", DictionaryType(StringTensorType([1]), FloatTensorType([1])))],
                            options={id(clf): {"zipmap": False}}, target_opset={"": 17, "ai.onnx.ml": 3})
        entries.append(write_ml_case(out_dir, f"test_ml_dict_vectorizer_{name}", m, [{"input": t} for t in tests]))

    def graph(nodes, key, value, outputs):
        g = helper.make_graph(nodes, "g", [helper.make_value_info(
            "m", helper.make_map_type_proto(key, helper.make_tensor_type_proto(value, None)))],
            [helper.make_tensor_value_info(o, t, None) for o, t in outputs])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 1)],
                                 ir_version=8)

    dv = helper.make_node("DictVectorizer", ["m"], ["v"], domain="ai.onnx.ml", int64_vocabulary=[40, 7, -3, 12])
    scaled = helper.make_node("Mul", ["v", "two"], ["y"])
    two = helper.make_node("Constant", [], ["two"], value=numpy_helper.from_array(np.array(2.0, np.float32)))
    m = graph([two, dv, scaled], TensorProto.INT64, TensorProto.FLOAT, [("y", TensorProto.FLOAT)])
    entries.append(write_ml_case(out_dir, "test_ml_dict_vectorizer_int64_keys", m,
                                 [{"m": {7: 1.5, 12: -2.25, 99: 4.0}}, {"m": {-3: 0.5}}]))
    to_float = helper.make_node("CastMap", ["m"], ["f"], domain="ai.onnx.ml", cast_to="TO_FLOAT", map_form="SPARSE",
                                max_map=6)
    to_int = helper.make_node("CastMap", ["m"], ["i"], domain="ai.onnx.ml", cast_to="TO_INT64", map_form="SPARSE",
                              max_map=4)
    m = graph([to_float, to_int], TensorProto.INT64, TensorProto.FLOAT, [("f", TensorProto.FLOAT),
                                                                          ("i", TensorProto.INT64)])
    entries.append(write_ml_case(out_dir, "test_ml_cast_map_sparse", m,
                                 [{"m": {0: 1.5, 3: -2.75, 5: 7.25, 9: 1.0}}, {"m": {2: 3.0}}]))
    return entries


# ---- the other estimators skl2onnx converts -----------------------------------------------

def estimators(out_dir: str) -> list:
    """Neighbours, clustering, decompositions, naive Bayes, neural networks, isolation forests,
    ensembles of other models, calibration, Gaussian processes (float64) and the power and
    quantile transforms: each converted by skl2onnx as a user would."""
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.cluster import KMeans
    from sklearn.decomposition import PCA
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from sklearn.ensemble import AdaBoostClassifier, IsolationForest, StackingClassifier, VotingClassifier
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
    from sklearn.linear_model import LogisticRegression
    from sklearn.mixture import GaussianMixture
    from sklearn.naive_bayes import BernoulliNB, GaussianNB
    from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor
    from sklearn.neural_network import MLPClassifier, MLPRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import PowerTransformer, QuantileTransformer

    entries = []

    def skl(name, model, x, xt, **kw):
        entries.append(_skl_case(out_dir, name, model, x, xt, **kw))

    rng, x, s = _data(4)
    xt = _test_rows(4)
    yb = (s > 0).astype(np.int64)
    y3 = _classes(s, 3)
    skl("test_ml_knn_classifier", KNeighborsClassifier(5).fit(x, np.array(["a", "b", "c"])[y3]), x, xt)
    skl("test_ml_knn_regressor", KNeighborsRegressor(4, weights="distance").fit(x, s), x, xt)
    # optim='cdist': the distances as one com.microsoft CDist node.
    skl("test_ml_knn_cdist_classifier", KNeighborsClassifier(3).fit(x, y3), x, xt,
        options={"zipmap": False, "optim": "cdist"})
    skl("test_ml_knn_cdist_regressor", KNeighborsRegressor(4, weights="distance").fit(x, s), x, xt,
        options={"optim": "cdist"})
    skl("test_ml_kmeans", KMeans(4, n_init=3, random_state=0).fit(x), x, xt)
    skl("test_ml_pca_logistic", make_pipeline(PCA(3), LogisticRegression()).fit(x, yb), x, xt)
    skl("test_ml_gaussian_nb", GaussianNB().fit(x, y3), x, xt)
    skl("test_ml_bernoulli_nb", BernoulliNB().fit(x, yb), x, xt)
    skl("test_ml_mlp_classifier", MLPClassifier((16,), max_iter=300, random_state=0).fit(x, y3), x, xt)
    skl("test_ml_mlp_regressor", MLPRegressor(hidden_layer_sizes=(16, 8), max_iter=300, random_state=0).fit(x, s),
        x, xt)
    # skl2onnx writes the isolation forest's trees in ai.onnx.ml opset 3 only.
    skl("test_ml_isolation_forest", IsolationForest(n_estimators=20, random_state=0).fit(x), x, xt,
        target_opset={"": 17, "ai.onnx.ml": 3})
    skl("test_ml_adaboost", AdaBoostClassifier(n_estimators=10, random_state=0).fit(x, yb), x, xt)
    skl("test_ml_voting_soft", VotingClassifier([("lr", LogisticRegression()), ("nb", GaussianNB())], voting="soft",
                                                flatten_transform=False).fit(x, y3), x, xt)
    skl("test_ml_stacking", StackingClassifier([("lr", LogisticRegression()), ("nb", GaussianNB())]).fit(x, y3), x, xt)
    skl("test_ml_calibrated_logistic", CalibratedClassifierCV(LogisticRegression(), cv=3).fit(x, yb), x, xt)
    skl("test_ml_lda", LinearDiscriminantAnalysis().fit(x, y3), x, xt)
    skl("test_ml_gaussian_mixture", GaussianMixture(3, random_state=0).fit(x), x, xt)
    skl("test_ml_quantile_power_logistic", make_pipeline(QuantileTransformer(n_quantiles=50), PowerTransformer(),
                                                         LogisticRegression()).fit(x, yb), x, xt)
    # float64 end to end: a float32 Gaussian process cancels catastrophically.
    xd, xtd = x[:60].astype(np.float64), xt.astype(np.float64)
    gp = GaussianProcessRegressor(ConstantKernel(1.0) * RBF(1.0) + WhiteKernel(0.1), random_state=0).fit(xd, s[:60])
    skl("test_ml_gaussian_process_f64", gp, xd, xtd)
    return entries


def write(out_dir: str) -> list:
    """Writes every ai.onnx.ml case and the text-feature cases; returns their cases.tsv
    entries."""
    return (trees(out_dir) + linear_and_pipelines(out_dir) + estimators(out_dir) + text_features(out_dir)
            + text_pipelines(out_dir) + map_inputs(out_dir))
