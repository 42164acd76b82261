"""The MNIST and CIFAR-10 readers, the checksum rules and the downloader, on tiny synthetic real-format files.

No test touches the network: ``urlopen`` is replaced by a fake that either fails (offline) or serves local files.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import pickle
import tarfile
import urllib.error
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daybreak.data import cifar10, download, mnist, synthetic
from daybreak.data.cifar10 import load_cifar10
from daybreak.data.mnist import load_mnist, read_idx
from daybreak.data.synthetic import write_cifar10, write_idx, write_mnist
from daybreak.errors import ChecksumError, DataError, OfflineError

MNIST_GZ = [f"{name}.gz" for name in mnist.FILE_NAMES]


def one_line(err: pytest.ExceptionInfo) -> str:
    message = str(err.value)
    assert "\n" not in message and message.strip() == message and message
    return message


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


class FakeResponse(io.BytesIO):
    def __init__(self, data: bytes):
        super().__init__(data)
        self.headers = {"Content-Length": str(len(data))}


class FakeNetwork:
    """Stands in for urlopen: serves ``routes`` (URL -> local file), fails every other URL as offline."""

    def __init__(self, routes: dict[str, Path] | None = None):
        self.routes = routes or {}
        self.requested: list[str] = []

    def __call__(self, request, timeout=None):
        url = request.full_url if hasattr(request, "full_url") else request
        self.requested.append(url)
        assert timeout == download.READ_TIMEOUT_S
        if url not in self.routes:
            raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")
        return FakeResponse(self.routes[url].read_bytes())


@pytest.fixture(autouse=True)
def no_network(monkeypatch, tmp_path):
    """Every test is offline unless it installs its own FakeNetwork; the cache folder is a temp folder."""
    network = FakeNetwork()
    monkeypatch.setattr(download, "urlopen", network)
    monkeypatch.setenv("DAYBREAK_DATA", str(tmp_path / "cache"))
    return network


# ------------------------------------------------------------------------------------------------------ IDX


@pytest.mark.parametrize("compress", [True, False])
@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "float32", "float64"])
def test_idx_round_trip(tmp_path, compress, dtype):
    array = (np.arange(2 * 3 * 4) - 7).reshape(2, 3, 4).astype(dtype)
    path = write_idx(tmp_path / "a.idx", array, compress)
    assert (path.read_bytes()[:2] == b"\x1f\x8b") == compress
    back = read_idx(path)
    assert back.dtype == np.dtype(dtype) and back.dtype.isnative
    assert back.shape == (2, 3, 4)
    np.testing.assert_array_equal(back, array)
    assert back.flags.writeable


def test_idx_header_is_big_endian(tmp_path):
    path = write_idx(tmp_path / "a", np.array([[1, 258]], dtype=np.int16), gzip=False)
    assert path.read_bytes() == bytes([0, 0, 0x0B, 2, 0, 0, 0, 1, 0, 0, 0, 2, 0, 1, 1, 2])
    np.testing.assert_array_equal(read_idx(path), [[1, 258]])


@settings(max_examples=40, deadline=None)
@given(
    shape=st.lists(st.integers(0, 5), min_size=1, max_size=4),
    dtype=st.sampled_from(["uint8", "int8", "int16", "int32", "float32", "float64"]),
    seed=st.integers(0, 2**16),
)
def test_idx_bytes_round_trip_property(shape, dtype, seed):
    array = np.random.default_rng(seed).integers(-100, 100, size=shape).astype(dtype)
    np.testing.assert_array_equal(mnist.parse_idx(synthetic.idx_bytes(array)), array)


def test_gzip_is_detected_by_content_not_name(tmp_path):
    path = tmp_path / "train-images-idx3-ubyte"  # no .gz, but gzipped content
    path.write_bytes(gzip.compress(synthetic.idx_bytes(np.full((1, 2, 2), 7, np.uint8))))
    np.testing.assert_array_equal(read_idx(path), np.full((1, 2, 2), 7))


@pytest.mark.parametrize("compress", [True, False])
def test_truncated_idx(tmp_path, compress):
    data = synthetic.idx_bytes(np.zeros((3, 4, 4), np.uint8))[:-5]
    path = tmp_path / "x"
    path.write_bytes(gzip.compress(data) if compress else data)
    with pytest.raises(DataError) as err:
        read_idx(path)
    message = one_line(err)
    assert str(path) in message and "truncated" in message and "48" in message and "43" in message


def test_idx_with_trailing_bytes(tmp_path):
    path = tmp_path / "x"
    path.write_bytes(synthetic.idx_bytes(np.zeros(5, np.uint8)) + b"\0")
    with pytest.raises(DataError) as err:
        read_idx(path)
    assert "trailing bytes" in one_line(err) and "needs 5" in one_line(err) and "found 6" in one_line(err)


def test_idx_header_cut_short(tmp_path):
    path = tmp_path / "x"
    path.write_bytes(bytes([0, 0, 8, 3, 0, 0]))
    with pytest.raises(DataError) as err:
        read_idx(path)
    assert "truncated" in one_line(err)


@pytest.mark.parametrize("data", [b"", b"PK\x03\x04junk", bytes([1, 0, 8, 1, 0, 0, 0, 1, 5])])
def test_idx_bad_magic(tmp_path, data):
    path = tmp_path / "x"
    path.write_bytes(data)
    with pytest.raises(DataError) as err:
        read_idx(path)
    assert "not an IDX file" in one_line(err) and str(path) in one_line(err)


def test_idx_unknown_type_code(tmp_path):
    path = tmp_path / "x"
    path.write_bytes(bytes([0, 0, 0x0A, 1, 0, 0, 0, 1, 5]))
    with pytest.raises(DataError) as err:
        read_idx(path)
    assert "0x0a" in one_line(err)


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_corrupt_gzip(tmp_path, damage):
    packed = bytearray(gzip.compress(synthetic.idx_bytes(np.arange(4000, dtype=np.int32))))
    if damage == "truncate":
        packed = packed[: len(packed) // 2]
    else:
        for i in range(20, 60):
            packed[i] ^= 0xFF
    path = tmp_path / "x.gz"
    path.write_bytes(bytes(packed))
    with pytest.raises(DataError) as err:
        read_idx(path)
    assert "gzip" in one_line(err) and str(path) in one_line(err)


# ---------------------------------------------------------------------------------------------------- MNIST


def patch_mnist_checksums(monkeypatch, folder: Path, table: dict[str, str], suffix: str) -> None:
    """Make the files now in ``folder`` the 'official' ones."""
    for name in mnist.FILE_NAMES:
        monkeypatch.setitem(table, name, sha256(folder / (name + suffix)))


def test_mnist_custom_subset_loads_with_allow_custom_data(tmp_path):
    written = write_mnist(tmp_path, 100, 30)
    data = load_mnist(tmp_path, allow_custom_data=True, download=False)
    assert data.train_x.shape == (100, 1, 28, 28)
    assert str(data.train_x.dtype) == "torch.uint8" and str(data.train_y.dtype) == "torch.int64"
    assert data.eval_x.shape == (30, 1, 28, 28) and data.eval_y.shape == (30,)
    np.testing.assert_array_equal(data.train_x[:, 0].numpy(), written["train_x"])
    np.testing.assert_array_equal(data.train_y.numpy(), written["train_y"])
    np.testing.assert_array_equal(data.eval_x[:, 0].numpy(), written["test_x"])
    np.testing.assert_array_equal(data.eval_y.numpy(), written["test_y"])
    assert sorted(data.train_y.unique().tolist()) == list(range(10))
    assert data.num_classes == 10 and data.official is False and data.source == str(tmp_path)
    assert len(data.notes) == 1 and all(name in data.notes[0] for name in MNIST_GZ)


def test_mnist_custom_subset_refused_without_allow_custom_data(tmp_path):
    write_mnist(tmp_path, 100, 30)
    with pytest.raises(ChecksumError) as err:
        load_mnist(tmp_path, download=False)
    message = one_line(err)
    assert "--allow-custom-data" in message and "official: false" in message
    assert str(tmp_path / "train-images-idx3-ubyte.gz") in message and "SHA-256" in message


def test_mnist_official_when_checksums_match(tmp_path, monkeypatch):
    write_mnist(tmp_path, 20, 10)
    patch_mnist_checksums(monkeypatch, tmp_path, mnist.GZ_SHA256, ".gz")
    data = load_mnist(tmp_path, download=False)
    assert data.official is True and data.notes == []


def test_mnist_only_one_file_custom_is_named(tmp_path, monkeypatch):
    write_mnist(tmp_path, 20, 10)
    patch_mnist_checksums(monkeypatch, tmp_path, mnist.GZ_SHA256, ".gz")
    monkeypatch.setitem(mnist.GZ_SHA256, mnist.EVAL_LABELS, "0" * 64)
    with pytest.raises(ChecksumError) as err:
        load_mnist(tmp_path, download=False)
    assert str(tmp_path / "t10k-labels-idx1-ubyte.gz") in one_line(err)
    assert "train-images" not in one_line(err)
    data = load_mnist(tmp_path, allow_custom_data=True, download=False)
    assert data.official is False and data.notes == [
        "custom data: t10k-labels-idx1-ubyte.gz not matching the official SHA-256 (--allow-custom-data)"
    ]


def test_mnist_uncompressed_files_checked_against_raw_checksums(tmp_path, monkeypatch):
    written = write_mnist(tmp_path, 40, 10, gzip=False, image_size=20)
    with pytest.raises(ChecksumError):
        load_mnist(tmp_path, download=False)
    patch_mnist_checksums(monkeypatch, tmp_path, mnist.RAW_SHA256, "")
    data = load_mnist(tmp_path, download=False)
    assert data.official is True
    assert data.train_x.shape == (40, 1, 20, 20) and data.input_shape == (1, 20, 20)
    np.testing.assert_array_equal(data.eval_x[:, 0].numpy(), written["test_x"])


def test_mnist_prefers_gz_when_both_forms_exist(tmp_path):
    gz = write_mnist(tmp_path, 30, 10, gzip=True, seed=1)
    write_mnist(tmp_path, 50, 10, gzip=False, seed=2)
    data = load_mnist(tmp_path, allow_custom_data=True, download=False)
    np.testing.assert_array_equal(data.train_x[:, 0].numpy(), gz["train_x"])


def test_mnist_label_image_count_mismatch(tmp_path):
    write_mnist(tmp_path, 100, 10)
    labels = read_idx(tmp_path / "train-labels-idx1-ubyte.gz")
    write_idx(tmp_path / "train-labels-idx1-ubyte.gz", labels[:99], gzip=True)
    with pytest.raises(DataError) as err:
        load_mnist(tmp_path, allow_custom_data=True, download=False)
    assert "100 images but" in one_line(err) and "99 labels" in one_line(err)


def test_mnist_label_out_of_range(tmp_path):
    write_mnist(tmp_path, 10, 10)
    write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", np.array([0, 1, 2, 3, 4, 5, 6, 7, 8, 10], np.uint8), True)
    with pytest.raises(DataError) as err:
        load_mnist(tmp_path, allow_custom_data=True, download=False)
    assert "label 10" in one_line(err)


@pytest.mark.parametrize("bad", [np.zeros((10, 784), np.uint8), np.zeros((10, 28, 28), np.float32)])
def test_mnist_images_must_be_3d_ubyte(tmp_path, bad):
    write_mnist(tmp_path, 10, 10)
    write_idx(tmp_path / "train-images-idx3-ubyte.gz", bad, True)
    with pytest.raises(DataError) as err:
        load_mnist(tmp_path, allow_custom_data=True, download=False)
    assert "expected 3-D unsigned bytes" in one_line(err)


def test_mnist_train_and_test_sizes_must_agree(tmp_path):
    write_mnist(tmp_path, 10, 10)
    write_idx(tmp_path / "t10k-images-idx3-ubyte.gz", np.zeros((10, 20, 20), np.uint8), True)
    with pytest.raises(DataError) as err:
        load_mnist(tmp_path, allow_custom_data=True, download=False)
    assert "28x28" in one_line(err) and "20x20" in one_line(err)


def test_mnist_truncated_file_in_folder(tmp_path):
    write_mnist(tmp_path, 10, 10, gzip=False)
    path = tmp_path / "train-images-idx3-ubyte"
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(DataError) as err:
        load_mnist(tmp_path, allow_custom_data=True, download=False)
    assert str(path) in one_line(err) and "7840" in one_line(err) and "7839" in one_line(err)


def test_mnist_offline_lists_missing_files_and_folder(tmp_path, no_network):
    folder = tmp_path / "mnist-data"
    with pytest.raises(OfflineError) as err:
        load_mnist(folder)
    message = one_line(err)
    assert message.startswith("mnist: cannot download (offline?")
    assert all(name in message for name in MNIST_GZ) and str(folder) in message and "--data-dir" in message
    # every mirror was tried for the first file, then it gave up (the others would time out the same way)
    assert no_network.requested == [mirror + "train-images-idx3-ubyte.gz" for mirror in mnist.MIRRORS]
    assert listing(folder) == []  # nothing half-written


def test_mnist_offline_lists_only_the_missing_file(tmp_path):
    write_mnist(tmp_path, 10, 10)
    (tmp_path / "t10k-images-idx3-ubyte.gz").unlink()
    with pytest.raises(OfflineError) as err:
        load_mnist(tmp_path, allow_custom_data=True)
    assert "put t10k-images-idx3-ubyte.gz into" in one_line(err)


def test_mnist_missing_without_download(tmp_path, no_network):
    with pytest.raises(DataError) as err:
        load_mnist(tmp_path, download=False)
    assert not isinstance(err.value, OfflineError)
    assert "downloading is disabled" in one_line(err) and str(tmp_path) in one_line(err)
    assert no_network.requested == []


def test_mnist_download_tries_mirrors_in_order(tmp_path, monkeypatch):
    source = tmp_path / "served"
    written = write_mnist(source, 50, 20)
    patch_mnist_checksums(monkeypatch, source, mnist.GZ_SHA256, ".gz")
    monkeypatch.setattr(mnist, "MIRRORS", ("https://dead.example/mnist/", "https://good.example/mnist/"))
    network = FakeNetwork({f"https://good.example/mnist/{name}": source / name for name in MNIST_GZ})
    monkeypatch.setattr(download, "urlopen", network)

    folder = tmp_path / "downloaded"
    data = load_mnist(folder)
    assert data.official is True and data.source == str(folder)
    np.testing.assert_array_equal(data.train_x[:, 0].numpy(), written["train_x"])
    np.testing.assert_array_equal(data.eval_y.numpy(), written["test_y"])
    assert network.requested[:2] == ["https://dead.example/mnist/train-images-idx3-ubyte.gz",
                                     "https://good.example/mnist/train-images-idx3-ubyte.gz"]
    assert listing(folder) == sorted(MNIST_GZ)  # no temp files left behind
    for name in MNIST_GZ:
        assert (folder / name).read_bytes() == (source / name).read_bytes()

    network.requested.clear()
    load_mnist(folder)  # second time: nothing downloaded
    assert network.requested == []


def test_mnist_download_with_wrong_bytes_is_refused(tmp_path, monkeypatch):
    source = tmp_path / "served"
    write_mnist(source, 10, 10)  # the published checksums do not match these
    monkeypatch.setattr(mnist, "MIRRORS", ("https://only.example/",))
    monkeypatch.setattr(download, "urlopen", FakeNetwork({f"https://only.example/{n}": source / n for n in MNIST_GZ}))
    folder = tmp_path / "downloaded"
    with pytest.raises(ChecksumError) as err:
        load_mnist(folder, allow_custom_data=True)  # never accepted for a download
    assert one_line(err).startswith("mnist: train-images-idx3-ubyte.gz downloaded from https://only.example/")
    assert listing(folder) == []


def test_mnist_default_folder_is_the_cache(tmp_path):
    write_mnist(tmp_path / "cache" / "mnist", 10, 10)
    data = load_mnist(None, allow_custom_data=True, download=False)
    assert data.source == str(tmp_path / "cache" / "mnist") and len(data.train_x) == 10


def test_mnist_through_the_task_registry(tmp_path):
    from daybreak.tasks import get_task

    write_mnist(tmp_path, 20, 10)
    data = get_task("mnist").load(tmp_path, True, False)
    assert data.train_x.shape == (20, 1, 28, 28) and data.official is False


# ------------------------------------------------------------------------------------------------ downloads


def test_sha256_file(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(os.urandom(3 * download.CHUNK_BYTES + 17))
    assert download.file_digest(path, "sha256") == hashlib.sha256(path.read_bytes()).hexdigest()
    assert download.file_digest(path, "md5") == md5(path)


def test_download_file_atomic_on_success(tmp_path, monkeypatch):
    payload = os.urandom(2 * download.CHUNK_BYTES + 5)
    (tmp_path / "src").write_bytes(payload)
    monkeypatch.setattr(download, "urlopen", FakeNetwork({"https://x.example/f": tmp_path / "src"}))
    dest = tmp_path / "out" / "f.bin"
    assert download.download_file("https://x.example/f", dest, hashlib.sha256(payload).hexdigest()) == dest
    assert dest.read_bytes() == payload and listing(dest.parent) == ["f.bin"]


def test_download_file_connection_drop_leaves_nothing(tmp_path, monkeypatch):
    class Dropping(FakeResponse):
        def read(self, n=-1):
            if self.tell() > 0:
                raise ConnectionResetError(104, "Connection reset by peer")
            return super().read(10)

    monkeypatch.setattr(download, "urlopen", lambda request, timeout: Dropping(b"x" * 100))
    with pytest.raises(OfflineError) as err:
        download.download_file("https://x.example/f", tmp_path / "f", None)
    assert "Connection reset by peer" in one_line(err)
    assert listing(tmp_path) == []


def test_download_file_checksum_mismatch_leaves_nothing(tmp_path, monkeypatch):
    (tmp_path / "src").write_bytes(b"not the file")
    monkeypatch.setattr(download, "urlopen", FakeNetwork({"https://x.example/f": tmp_path / "src"}))
    dest = tmp_path / "out" / "f"
    with pytest.raises(ChecksumError) as err:
        download.download_file("https://x.example/f", dest, "0" * 64)
    assert "does not match the official SHA-256" in one_line(err)
    assert listing(tmp_path / "out") == []


# -------------------------------------------------------------------------------------------------- CIFAR-10


def assert_cifar_matches(data, written) -> None:
    assert data.train_x.shape == (len(written["train_y"]), 3, 32, 32) and str(data.train_x.dtype) == "torch.uint8"
    assert data.eval_x.shape == (len(written["test_y"]), 3, 32, 32) and str(data.eval_y.dtype) == "torch.int64"
    np.testing.assert_array_equal(data.train_x.numpy(), written["train_x"])
    np.testing.assert_array_equal(data.train_y.numpy(), written["train_y"])
    np.testing.assert_array_equal(data.eval_x.numpy(), written["test_x"])
    np.testing.assert_array_equal(data.eval_y.numpy(), written["test_y"])
    assert data.num_classes == 10


def test_cifar_tarball_loads(tmp_path):
    written = write_cifar10(tmp_path, 12, 9)
    data = load_cifar10(tmp_path, allow_custom_data=True, download=False)
    assert_cifar_matches(data, written)
    assert data.train_x.shape == (60, 3, 32, 32) and data.eval_y.tolist() == written["test_y"].tolist()
    assert data.official is False and "cifar-10-python.tar.gz" in data.notes[0]
    assert data.source == str(tmp_path / "cifar-10-python.tar.gz")
    assert listing(tmp_path) == ["cifar-10-python.tar.gz"]  # read in place, nothing extracted


def test_cifar_pixel_layout_is_channel_major(tmp_path):
    written = write_cifar10(tmp_path, 2, 2, as_tarball=False)
    raw = pickle.loads((written["path"] / "test_batch").read_bytes(), encoding="bytes")[b"data"]
    data = load_cifar10(tmp_path, allow_custom_data=True, download=False)
    image = data.eval_x[1].numpy()
    assert image[0, 0, 0] == raw[1, 0] and image[0, 0, 5] == raw[1, 5] and image[0, 1, 0] == raw[1, 32]
    assert image[1, 0, 0] == raw[1, 1024] and image[2, 31, 31] == raw[1, 3071]


def test_cifar_tarball_refused_without_allow_custom_data(tmp_path):
    write_cifar10(tmp_path, 2, 2)
    with pytest.raises(ChecksumError) as err:
        load_cifar10(tmp_path, download=False)
    assert "--allow-custom-data" in one_line(err) and str(tmp_path / "cifar-10-python.tar.gz") in one_line(err)


def test_cifar_tarball_official_when_checksum_matches(tmp_path, monkeypatch):
    write_cifar10(tmp_path, 2, 2)
    monkeypatch.setattr(cifar10, "TARBALL_SHA256", sha256(tmp_path / "cifar-10-python.tar.gz"))
    data = load_cifar10(tmp_path, download=False)
    assert data.official is True and data.notes == []


@pytest.mark.parametrize("inside", [True, False])
def test_cifar_extracted_folder_loads(tmp_path, inside):
    written = write_cifar10(tmp_path, 7, 5, as_tarball=False, pickle_protocol=4)
    folder = tmp_path if inside else tmp_path / "cifar-10-batches-py"  # the folder itself may be the batches dir
    data = load_cifar10(folder, allow_custom_data=True, download=False)
    assert_cifar_matches(data, written)
    assert data.official is False and data.source == str(tmp_path / "cifar-10-batches-py")
    assert "MD5" in data.notes[0] and "data_batch_1" in data.notes[0]


def test_cifar_extracted_folder_checked_by_md5(tmp_path, monkeypatch):
    written = write_cifar10(tmp_path, 3, 3, as_tarball=False)
    with pytest.raises(ChecksumError) as err:
        load_cifar10(tmp_path, download=False)
    assert "MD5" in one_line(err) and "--allow-custom-data" in one_line(err)
    for name in cifar10.ALL_BATCHES:
        monkeypatch.setitem(cifar10.BATCH_MD5, name, md5(written["path"] / name))
    assert load_cifar10(tmp_path, download=False).official is True


def test_cifar_tarball_preferred_over_extracted_folder(tmp_path):
    from_tar = write_cifar10(tmp_path, 4, 4, as_tarball=True, seed=1)
    write_cifar10(tmp_path, 6, 6, as_tarball=False, seed=2)
    data = load_cifar10(tmp_path, allow_custom_data=True, download=False)
    assert_cifar_matches(data, from_tar)


def test_cifar_truncated_tarball(tmp_path):
    write_cifar10(tmp_path, 20, 20)
    tarball = tmp_path / "cifar-10-python.tar.gz"
    tarball.write_bytes(tarball.read_bytes()[: tarball.stat().st_size // 2])
    with pytest.raises(ChecksumError):  # the checksum catches it first
        load_cifar10(tmp_path, download=False)
    with pytest.raises(DataError) as err:
        load_cifar10(tmp_path, allow_custom_data=True, download=False)
    assert not isinstance(err.value, ChecksumError)
    assert "corrupt or truncated" in one_line(err) and str(tarball) in one_line(err)


def test_cifar_not_a_tarball(tmp_path):
    (tmp_path / "cifar-10-python.tar.gz").write_bytes(b"<html>404 not found</html>")
    with pytest.raises(DataError) as err:
        load_cifar10(tmp_path, allow_custom_data=True, download=False)
    assert "corrupt or truncated" in one_line(err)


def test_cifar_extracted_folder_missing_batch(tmp_path):
    written = write_cifar10(tmp_path, 2, 2, as_tarball=False)
    (written["path"] / "test_batch").unlink()
    with pytest.raises(DataError) as err:
        load_cifar10(tmp_path, allow_custom_data=True, download=False)
    assert "lacks test_batch" in one_line(err)


def batch_bytes(**overrides) -> bytes:
    batch = {b"batch_label": b"x", b"labels": [1, 2], b"data": np.zeros((2, 3072), np.uint8), b"filenames": []}
    batch.update({key.encode(): value for key, value in overrides.items()})
    return pickle.dumps(batch, protocol=2)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"\x80\x02garbage", "cannot unpickle"),
        (pickle.dumps({b"data": 1}, protocol=2)[:-3], "cannot unpickle"),
        (pickle.dumps([1, 2, 3]), "not a CIFAR-10 batch dict"),
        (pickle.dumps({b"labels": [1]}), "no 'data' entry"),
        (batch_bytes(data=np.zeros((2, 3072), np.float32)), "expected uint8 of shape (N, 3072)"),
        (batch_bytes(data=np.zeros((2, 3000), np.uint8)), "expected uint8 of shape (N, 3072)"),
        (batch_bytes(data=[[0] * 3072] * 2), "'data' is a list"),
        (batch_bytes(labels=[1, 2, 3]), "2 images but 3 labels"),
        (batch_bytes(labels=[1, 10]), "label 10, outside 0..9"),
        (batch_bytes(labels=[-1, 0]), "label -1, outside 0..9"),
        (batch_bytes(labels=[0.5, 1.0]), "expected a flat list of integers"),
    ],
)
def test_cifar_bad_batch_content(tmp_path, content, expected):
    written = write_cifar10(tmp_path, 2, 2, as_tarball=False)
    (written["path"] / "data_batch_3").write_bytes(content)
    with pytest.raises(DataError) as err:
        load_cifar10(tmp_path, allow_custom_data=True, download=False)
    assert expected in one_line(err) and "data_batch_3" in one_line(err)


class Exploit:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class EvalExploit:
    def __reduce__(self):
        return (eval, ("__import__('os').getcwd()",))


@pytest.mark.parametrize("as_tarball", [True, False])
def test_cifar_malicious_pickle_is_refused(tmp_path, as_tarball):
    marker = tmp_path / "pwned"
    evil = pickle.dumps({b"data": Exploit(marker), b"labels": []}, protocol=2)
    written = write_cifar10(tmp_path / "data", 2, 2, as_tarball=False)
    (written["path"] / "test_batch").write_bytes(evil)
    folder = tmp_path / "data"
    if as_tarball:  # the same files, packed into a tarball
        folder = tmp_path / "packed"
        folder.mkdir()
        with tarfile.open(folder / "cifar-10-python.tar.gz", "w:gz") as tar:
            tar.add(written["path"], arcname="cifar-10-batches-py")
    with pytest.raises(DataError) as err:
        load_cifar10(folder, allow_custom_data=True, download=False)
    message = one_line(err)
    assert "refused" in message and ".system" in message and "test_batch" in message
    assert not marker.exists()


def test_restricted_unpickler_refuses_builtins_eval():
    with pytest.raises(DataError) as err:
        cifar10.unpickle_batch(pickle.dumps(EvalExploit(), protocol=2), "evil")
    assert "__builtin__.eval" in one_line(err)  # protocol 2 spells the module the Python 2 way


@pytest.mark.parametrize("protocol", [0, 2, 4, 5])
def test_restricted_unpickler_reads_numpy_arrays_at_any_protocol(protocol):
    batch = {b"data": np.arange(2 * 3072).astype(np.uint8).reshape(2, 3072), b"labels": [np.int64(3), 9]}
    loaded = cifar10.unpickle_batch(pickle.dumps(batch, protocol=protocol), "batch")
    x, y = cifar10.decode_batch(loaded, "batch")
    assert x.shape == (2, 3, 32, 32) and y.tolist() == [3, 9]
    np.testing.assert_array_equal(x.reshape(2, 3072), batch[b"data"])


def test_restricted_unpickler_reads_numpy_1x_module_names():
    data = pickle.dumps({b"data": np.zeros((1, 3072), np.uint8), b"labels": [0]}, protocol=2)
    legacy = data.replace(b"numpy._core.multiarray", b"numpy.core.multiarray")  # as numpy 1.x writes it
    assert b"numpy.core.multiarray\n_reconstruct" in legacy
    x, y = cifar10.decode_batch(cifar10.unpickle_batch(legacy, "batch"), "batch")
    assert x.shape == (1, 3, 32, 32) and y.tolist() == [0]


def test_cifar_offline(tmp_path):
    folder = tmp_path / "cifar"
    with pytest.raises(OfflineError) as err:
        load_cifar10(folder)
    message = one_line(err)
    assert message.startswith("cifar10: cannot download (offline?")
    assert "cifar-10-python.tar.gz" in message and "cifar-10-batches-py" in message and str(folder) in message


def test_cifar_download(tmp_path, monkeypatch):
    written = write_cifar10(tmp_path / "served", 3, 4)
    served = written["path"]
    monkeypatch.setattr(cifar10, "TARBALL_SHA256", sha256(served))
    monkeypatch.setattr(download, "urlopen", FakeNetwork({cifar10.TARBALL_URLS[0]: served}))
    data = load_cifar10(tmp_path / "cifar")
    assert_cifar_matches(data, written)
    assert data.official is True
    assert listing(tmp_path / "cifar") == ["cifar-10-python.tar.gz"]


def test_synthetic_cifar_meta_and_batch_format(tmp_path):
    written = write_cifar10(tmp_path, 3, 2, as_tarball=False)
    meta = pickle.loads((written["path"] / "batches.meta").read_bytes(), encoding="bytes")
    assert meta[b"label_names"][0] == b"airplane" and len(meta[b"label_names"]) == 10
    batch = pickle.loads((written["path"] / "data_batch_2").read_bytes(), encoding="bytes")
    assert set(batch) == {b"batch_label", b"labels", b"data", b"filenames"}
    assert batch[b"data"].dtype == np.uint8 and batch[b"data"].shape == (3, 3072)
    assert batch[b"labels"] == written["train_y"][3:6].tolist()
