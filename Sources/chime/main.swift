import ChimeCLI
import Foundation

exit(chimeMain(Array(CommandLine.arguments.dropFirst())))
