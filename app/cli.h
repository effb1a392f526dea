/* cli.h — verbs implemented outside main.c. Each takes argv with the verb at
 * argv[0] and returns the process exit code. */
#ifndef DD_CLI_H
#define DD_CLI_H

extern const char cli_dataset_usage[];
extern const char cli_example_usage[];
int cli_dataset(int argc, char **argv);
int cli_example(int argc, char **argv);
extern const char cli_net_usage[];
int cli_net(int argc, char **argv);

#endif
