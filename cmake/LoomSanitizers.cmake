# LOOM_SANITIZE applies to every target, so that one preset builds a fully
# instrumented tree (a half-instrumented TSan build reports false races).
if(LOOM_SANITIZE)
  add_compile_options(-fsanitize=${LOOM_SANITIZE} -fno-omit-frame-pointer -g)
  add_link_options(-fsanitize=${LOOM_SANITIZE})
  if(LOOM_SANITIZE MATCHES "undefined")
    add_compile_options(-fno-sanitize-recover=undefined)
  endif()
endif()
