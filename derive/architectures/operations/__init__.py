"""Operations as the unit: each declares its parameters, its GEMMs and what it saves for backward (issue 25)."""
