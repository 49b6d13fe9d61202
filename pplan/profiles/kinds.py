"""The kinds of profile pplan reads (`hardware`, `models`: each a folder of TOML files); imports only `typing`, so
the command line can offer them without loading the profile validators."""

from __future__ import annotations

from typing import Literal, get_args

ProfileKind = Literal["hardware", "models"]
PROFILE_KINDS: tuple[ProfileKind, ...] = get_args(ProfileKind)
