"""A person's binary file in the workspace (feature T9) is stored as it is; the text tools
say it is binary instead of showing mojibake or failing obscurely."""
from __future__ import annotations

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))


def test_list_files_lists_a_binary_file_with_its_size(call, workspace):
    (workspace / "photo.png").write_bytes(PNG)
    assert "photo.png" in call("list_files").content and str(len(PNG)) in call("list_files").content


def test_read_file_says_a_binary_file_is_binary(call, workspace):
    (workspace / "photo.png").write_bytes(PNG)
    outcome = call("read_file", path="photo.png")
    assert outcome.content.startswith(f"Binary output: {len(PNG)} bytes that are not clean "
                                      "UTF-8 text")


def test_the_csv_tools_say_a_binary_file_is_binary(call, workspace):
    (workspace / "photo.png").write_bytes(PNG)
    (workspace / "nul.csv").write_bytes(b"a,b\n1,\x002\n")
    assert call("csv_describe", path="photo.png").error == (
        "'photo.png' is not UTF-8 text (a binary file, or text in another encoding); the CSV "
        "tools read UTF-8 only.")
    # Valid UTF-8 with NUL parses as CSV; its result holds NUL, so it comes back as binary.
    assert call("csv_describe", path="nul.csv").content.startswith("Binary output: ")
