# Writes OUTPUT: a C++ source defining `extern const char* const SYMBOL` (declared in DECLARATION)
# as the text of INPUT in a raw string literal. Run at build time (cmake -P), so the embedded text
# always matches the file: ops/elementwise/elementwise_math.h is compiled as a header and, through this, also
# into every generated kernel.
file(READ "${INPUT}" text)
string(FIND "${text}" ")tg_embed" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw string delimiter )tg_embed")
endif()
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${NAME} by cmake/embed_text.cmake at build time: edit that file instead.\n"
  "#include \"${DECLARATION}\"\n\n"
  "namespace tg {\n\n"
  "extern const char* const ${SYMBOL} = R\"tg_embed(${text})tg_embed\";\n\n"
  "}  // namespace tg\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
