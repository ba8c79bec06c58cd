/* convert.c: converts an ONNX file with the converter's C API and prints the
 * report's size. Usage: convert_c IN.onnx OUT.kite */
#include <stdio.h>
#include <string.h>

#include <kite/converter.h>

int main(int argc, char **argv) {
  kite_convert_options *options = NULL;
  char *report = NULL;
  kite_status status;
  if (argc != 3) {
    fprintf(stderr, "usage: %s IN.onnx OUT.kite\n", argv[0]);
    return 2;
  }
  if (kite_converter_version_number() != KITE_VERSION_NUMBER) {
    fprintf(stderr, "kite/converter.h is %s but the library is another version\n",
            KITE_VERSION_STRING);
    return 1;
  }
  status = kite_convert_options_create(&options);
  if (status == KITE_OK) status = kite_convert_options_set_opt_level(options, 2);
  if (status == KITE_OK) status = kite_convert_file(argv[1], argv[2], options, &report);
  kite_convert_options_destroy(options);
  if (status != KITE_OK) {
    /* kite_status_string() is libkite's; this program links only the converter. */
    fprintf(stderr, "conversion failed (status %d): %s\n", (int)status,
            kite_converter_last_error());
    return 1;
  }
  printf("converted %s -> %s (report: %lu bytes of JSON)\n", argv[1], argv[2],
         (unsigned long)strlen(report));
  kite_converter_free_string(report);
  return 0;
}
