"""Read a GGUF file's header (metadata and tensor infos) without touching tensor data.

``gguf.GGUFReader`` does the parsing, but it turns every array element into its own numpy
view: Qwen's 151,936-entry vocabulary and its merges then cost seconds. This subclass keeps
the library's parser for everything else and only reads arrays in one step (numbers) or
skips over them (strings), and it records tensor extents instead of building data views,
so a 4 GB model is checked in milliseconds and a truncated file can be told apart.
"""

from __future__ import annotations

import struct
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFReader, GGUFValueType
from gguf.gguf_reader import ReaderField


@dataclass(frozen=True)
class TensorInfo:
    """One tensor as the header describes it; ``dims`` are in ggml order (ne[0] first)."""

    name: str
    type: GGMLQuantizationType
    dims: tuple[int, ...]
    offset: int  # absolute position of the data in the file
    n_bytes: int


class HeaderReader(GGUFReader):
    """A GGUFReader that reads metadata and tensor infos only."""

    tensor_infos: list[TensorInfo]

    def __init__(self, path: str | Path) -> None:
        self.tensor_infos = []
        self._mmap: Any = None
        super().__init__(path, "r")

    @property  # type: ignore[override]
    def data(self) -> np.ndarray:
        return self._data

    @data.setter
    def data(self, value: np.ndarray) -> None:
        # Views of an np.memmap run a slow Python hook each; plain ndarray views of the same
        # mapping do not, and GGUFReader takes thousands of them.
        self._mmap = getattr(value, "_mmap", None)
        self._data = value.view(np.ndarray) if isinstance(value, np.memmap) else value

    def _skip_strings(self, offs: int, count: int) -> int:
        """Offset just past ``count`` length-prefixed strings (a tight loop: vocabularies are big)."""
        little = (sys.byteorder == "little") == (self.byte_order == "I")
        unpack = struct.Struct("<Q" if little else ">Q").unpack_from
        buf = self._mmap if self._mmap is not None else self._data
        for _ in range(count):
            offs += 8 + unpack(buf, offs)[0]
        return offs

    def _get_field_parts(self, orig_offs: int, raw_type: int) -> tuple[int, list[Any], list[int], list[GGUFValueType]]:
        if GGUFValueType(raw_type) != GGUFValueType.ARRAY:
            return super()._get_field_parts(orig_offs, raw_type)
        raw_itype = self._get(orig_offs, np.uint32)
        alen = self._get(orig_offs + 4, np.uint64)
        if len(raw_itype) != 1 or len(alen) != 1:
            raise ValueError("header ends inside a metadata array")
        itype, count = GGUFValueType(int(raw_itype[0])), int(alen[0])
        offs = orig_offs + 12
        nptype = self.gguf_scalar_to_np.get(itype)
        if nptype is not None:
            values = self._get(offs, nptype, count)
            if len(values) != count:
                raise ValueError("header ends inside a metadata array")
            return 12 + int(values.nbytes), [raw_itype, alen, values], [2], [GGUFValueType.ARRAY, itype]
        if itype == GGUFValueType.STRING:
            # Skip the strings: only their total length matters to find the next field.
            offs = self._skip_strings(offs, count)
            if offs > len(self.data):
                raise ValueError("header ends inside a metadata array")
            return offs - orig_offs, [raw_itype, alen], [], [GGUFValueType.ARRAY, itype]
        return super()._get_field_parts(orig_offs, raw_type)

    def _build_tensors(self, start_offs: int, fields: list[ReaderField]) -> None:
        seen: set[str] = set()
        for field in fields:
            _len, name_data, _n_dims, dims, raw_dtype, offset_tensor = field.parts
            name = bytes(name_data).decode("utf-8")
            if name in seen:
                raise ValueError(f"tensor {name} appears twice")
            seen.add(name)
            ggml_type = GGMLQuantizationType(int(raw_dtype[0]))
            shape = tuple(int(d) for d in dims)
            block_size, type_size = GGML_QUANT_SIZES[ggml_type]
            n_elements = int(np.prod(shape, dtype=object)) if shape else 1
            self.tensor_infos.append(
                TensorInfo(name, ggml_type, shape, start_offs + int(offset_tensor[0]), n_elements * type_size // block_size)
            )

    def value(self, key: str) -> Any:
        """The value of a scalar or string field, or None when absent (arrays are not kept)."""
        field = self.fields.get(key)
        if field is None or not field.types or field.types[0] == GGUFValueType.ARRAY:
            return None
        return field.contents()

    def array_length(self, key: str) -> int | None:
        field = self.fields.get(key)
        if field is None or not field.types or field.types[0] != GGUFValueType.ARRAY:
            return None
        return int(field.parts[4][0])  # parts: key length, key, type, item type, count, ...

    def close(self) -> None:
        """Drop the memory map now rather than at garbage collection."""
        mm = self._mmap
        self.fields.clear()
        self.data = np.empty(0, dtype=np.uint8)
        if mm is not None:
            try:
                mm.close()
            except BufferError:
                pass  # a view is still alive somewhere; the GC will close it
