
BroisJ #;Ú>Ë®â=²¾@e³'A÷;Aö±ˆ@Ú¦AuÙMAµV§@³O8@ÅkRAÙAHD™@–Úú@ðX,A02oAÏµ;?=œ;A¬mç@67¤AÅNAlDA¢ªA«ŒABªAfð?Ë›AGw@“<QA*D¿r|¬A`Ð@o“Aã9A÷ƒA>DATÑ”¾–#ñ@Ñòþ@zª_A